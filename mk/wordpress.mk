# WordPress: durable-ops mu-plugin, publishing proxy, throwaway WordPress (issue 3).
# Included by the top Makefile. The integration suite starts its own WordPress (+ a plain one
# without the plugin) through stack/wordpress.sh and tears them down; `wp-up` keeps one running
# for manual work (state and app password in $(WP_STATE), outside the repository).
WP_STATE ?= $(DURABLE_CACHE)/wordpress/dev-state.json

.PHONY: test-wordpress wp-up wp-down

test-wordpress: setup
	cd ledger-service && $(PY) -m pytest -q tests/test_wordpress_client.py
	$(PY) -m pytest -q -s tests/wordpress

wp-up:
	bash stack/wordpress.sh up --state $(WP_STATE)
	@echo "credentials: $(basename $(WP_STATE)).env (WORDPRESS_URL, WORDPRESS_USER, WORDPRESS_APP_PASSWORD)"

wp-down:
	bash stack/wordpress.sh down --state $(WP_STATE)
