#!/bin/sh
# One-shot WordPress setup for docker-compose (runs in the wordpress:cli image): install the
# site once, then write a fresh application password for the publishing proxy into the shared
# secrets volume. Never prints the password.
set -eu
until wp db check --quiet >/dev/null 2>&1; do echo "waiting for MariaDB..."; sleep 2; done
if ! wp core is-installed >/dev/null 2>&1; then
  wp core install --url="${WP_URL}" --title="Durable Steps demo" --admin_user="${WP_ADMIN_USER}" \
     --admin_password="$(head -c 24 /dev/urandom | base64)" --admin_email="admin@example.invalid" --skip-email
fi
if [ ! -s /secrets/wp-app-password ]; then
  umask 077
  wp user application-password create "${WP_ADMIN_USER}" durable-proxy --porcelain > /secrets/wp-app-password
fi
echo "WordPress ready at ${WP_URL}; proxy credential in the secrets volume"
