# Release artifacts and install tests (issue 18, items 1-4). Included by the top Makefile.
#
#   make dist             dist/: durable_ledger wheel + sdist, n8n-nodes-durable-<v>.tgz (npm pack),
#                         durable-ops-<v>.zip (regular WordPress plugin from the mu-plugin's source)
#   make test-dist        the artifacts as users install them: versions agree; the wheel alone in a
#                         fresh venv (init-db, serve, begin -> proxy -> WordPress -> confirm, proxy
#                         /health, sweep); the plugin zip through WordPress's plugin API (suite +
#                         uninstall) on 6.1
#   make test-wp-matrix   WordPress $(WP_NEW_VERSION): plugin + proxy + reconcile suites (mu-plugin), plugin
#                         suite + zip lifecycle (regular plugin); 6.1 is covered by test-wordpress,
#                         test-reconcile and test-dist
#   make test-n8n-matrix  the node's e2e suite on n8n $(N8N_2X_VERSION), $(N8N_2X_NEW_VERSION) and
#                         $(N8N_1X_VERSION), the dist tarball installed into the nodes folder the way n8n
#                         installs community packages (`make test`'s only run of it; the measurement test,
#                         1 round, on $(N8N_2X_VERSION) only); and the retry suite's same-event module
#                         (tests/retry/test_same_event.py) on $(N8N_2X_NEW_VERSION) (make test-retry runs it on
#                         $(N8N_2X_VERSION))
#   make wp-lint          php -l on the plugin and the stack's PHP; PHP_CodeSniffer + WPCS if present
# Versions: the top-level VERSION file (python3 stack/version.py check|sync).
# Cached outside the clone in $(DURABLE_CACHE): wordpress-core-<version>/, n8n-<version>/.
DIST_DIR := $(CURDIR)/dist
WP_NEW_VERSION ?= 7.1.4
N8N_2X_VERSION ?= 2.40.7
# The newest n8n 2.x the registry serves whole: 2.41.3 (latest) depends on @n8n/agents@0.26.2,
# which the registry does not have (`npm view @n8n/agents versions` ends at 0.26.1, 2026-12-07),
# so `npm i n8n@2.41.3` fails (ETARGET); 2.41.2 was never published; 2.41.1 (@n8n/agents@0.26.1)
# installs.
N8N_2X_NEW_VERSION ?= 2.41.1
N8N_1X_VERSION ?= 1.123.81
RELEASE = $(shell cat $(CURDIR)/VERSION)
PLUGIN_ZIP = $(DIST_DIR)/durable-ops-$(RELEASE).zip
NODE_TGZ = $(DIST_DIR)/n8n-nodes-durable-$(RELEASE).tgz

.PHONY: dist test-dist test-wp-matrix test-n8n-matrix wp-lint version-check wp-cores n8n-versions

# The WordPress cores and n8n versions the suites below run on (`make prepare` builds them first).
wp-cores: deps
	@python3 stack/wordpress.py core --wp-version system >/dev/null
	@python3 stack/wordpress.py core --wp-version $(WP_NEW_VERSION) >/dev/null

n8n-versions:
	@for v in $(N8N_2X_VERSION) $(N8N_2X_NEW_VERSION) $(N8N_1X_VERSION); do N8N_VERSION=$$v bash stack/n8n.sh install >/dev/null || exit 1; done

version-check:
	@python3 stack/version.py check >/dev/null

dist: setup version-check node-build
	@$(PY) -c 'import build' 2>/dev/null || $(PIP) install -q 'build>=1.2'
	@rm -rf $(DIST_DIR) && mkdir -p $(DIST_DIR)
	@$(PY) -m build --sdist --wheel --outdir $(DIST_DIR) ledger-service >$(DIST_DIR)/.build.log 2>&1 \
	  || { cat $(DIST_DIR)/.build.log; exit 1; }
	@rm -f $(DIST_DIR)/.build.log
	@$(NODE_ENV) cd $(NODE_PKG) && npm pack --silent --pack-destination $(DIST_DIR) >/dev/null
	@python3 stack/wp_plugin_zip.py --out $(DIST_DIR) >/dev/null
	@cd $(DIST_DIR) && sha256sum * >SHA256SUMS && ls -l | tail -n +2

test-dist: dist
	bash stack/ensure-services.sh
	@python3 stack/wordpress.py core --wp-version system >/dev/null   # php, MariaDB, WordPress 6.1 packages
	$(PY) -m pytest -q -s tests/install
	DURABLE_WP_PLUGIN_ZIP=$(PLUGIN_ZIP) $(PY) -m pytest -q -s tests/wordpress/test_plugin.py

test-wp-matrix: dist reconcile-browser
	bash stack/ensure-services.sh
	@python3 stack/wordpress.py core --wp-version $(WP_NEW_VERSION)
	DURABLE_WP_VERSION=$(WP_NEW_VERSION) $(PY) -m pytest -q -s tests/wordpress
	DURABLE_WP_VERSION=$(WP_NEW_VERSION) $(PY) -m pytest -q -s tests/reconcile
	DURABLE_WP_VERSION=$(WP_NEW_VERSION) DURABLE_WP_PLUGIN_ZIP=$(PLUGIN_ZIP) $(PY) -m pytest -q -s tests/wordpress/test_plugin.py
	DURABLE_WP_VERSION=$(WP_NEW_VERSION) $(PY) -m pytest -q -s tests/install/test_wp_plugin_zip.py

test-n8n-matrix: dist pipeline-deps
	@for v in $(N8N_2X_VERSION) $(N8N_2X_NEW_VERSION) $(N8N_1X_VERSION); do \
	  home=$$(N8N_VERSION=$$v bash stack/n8n.sh install) || exit 1; \
	  echo "== node e2e on n8n $$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
	    $$home/node_modules/n8n/package.json), package $(notdir $(NODE_TGZ)) installed as n8n installs community packages"; \
	  skip=$$([ $$v = $(N8N_2X_VERSION) ] || echo --test-skip-pattern=measure); \
	  ( $(NODE_ENV) N8N_VERSION=$$v DURABLE_NODE_TARBALL=$(NODE_TGZ) DURABLE_BENCH_RUNS=$${DURABLE_BENCH_RUNS:-1} \
	    node --test --test-reporter=spec --test-concurrency=1 $$skip tests/n8n/e2e.test.mjs ) || exit 1; \
	done
	N8N_VERSION=$(N8N_2X_NEW_VERSION) $(PY) -m pytest -q -s tests/retry/test_same_event.py

wp-lint:
	@for f in ledger-service/durable_ledger/wordpress/*.php stack/wp/*.php; do php -l $$f >/dev/null || exit 1; done; echo "php -l: ok"
	@bash stack/phpcs.sh
