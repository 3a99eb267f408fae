# n8n community node package (n8n-nodes-durable): build, lint, unit tests, end-to-end in real n8n.
# Included by the top-level Makefile. Node 24 and n8n 2.40.7 come from stack/ and are cached
# outside the clone in $(DURABLE_CACHE); so are the package's devDependencies (keyed by the
# lockfile hash), because CI starts from a fresh clone every time.
NODE_PKG := n8n-nodes-durable
NODE_ENV = export PATH="$$(bash $(CURDIR)/stack/node24.sh):$$PATH";

.PHONY: test-node node-deps node-build node-lint node-unit node-e2e n8n-install


# The e2e suite in real n8n runs in `make test` once per n8n version, with the package installed the
# way users install it (test-n8n-matrix in mk/dist.mk); `make node-e2e` runs it from this checkout.
test-node: setup node-build node-lint node-unit

# devDependencies: npm ci once per lockfile into the cache, then a symlink. A developer's own
# real node_modules directory is left alone. --ignore-scripts: eslint-plugin-n8n-nodes-base has
# an "only-allow pnpm" preinstall hook.
node-deps:
	@$(NODE_ENV) set -euo pipefail; cd $(NODE_PKG); \
	if [ -d node_modules ] && [ ! -L node_modules ]; then exit 0; fi; \
	key=$$(cat package.json package-lock.json | sha256sum | cut -c1-16); \
	dir="$(DURABLE_CACHE)/node-deps-$$key"; \
	if [ ! -f "$$dir/.complete" ]; then \
	  echo "[node-deps] npm ci into $$dir"; rm -rf "$$dir"; mkdir -p "$$dir"; \
	  cp package.json package-lock.json "$$dir/"; \
	  (cd "$$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error); \
	  touch "$$dir/.complete"; \
	fi; \
	ln -sfn "$$dir/node_modules" node_modules

node-build: node-deps
	@$(NODE_ENV) cd $(NODE_PKG) && rm -rf dist && npx --no-install n8n-node build 2>&1 | tr '\r' '\n' | grep -v 'Building TypeScript files' ; test -f $(CURDIR)/$(NODE_PKG)/dist/nodes/DurableStep/DurableStep.node.js

node-lint: node-deps
	@$(NODE_ENV) cd $(NODE_PKG) && npx --no-install n8n-node lint

node-unit: setup node-build
	@$(NODE_ENV) cd $(NODE_PKG) && node --test --test-reporter=spec test/*.test.mjs

n8n-install:
	@bash stack/n8n.sh install >/dev/null

# The measurement test runs 2 rounds here (1 in test-n8n-matrix) (it checks that `make bench`'s n8n
# half works; the numbers come from `make bench`, 21 rounds).
node-e2e: setup node-build n8n-install
	@$(NODE_ENV) DURABLE_BENCH_RUNS=$${DURABLE_BENCH_RUNS:-2} node --test --test-reporter=spec --test-concurrency=1 tests/n8n/e2e.test.mjs
