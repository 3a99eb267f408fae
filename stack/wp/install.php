<?php
/*
 * Non-interactive WordPress install for the throwaway test stack.
 * Env: WORDPRESS_CONFIG (config-<name>.php), DURABLE_WP_URL, DURABLE_WP_ADMIN_PASSWORD,
 * DURABLE_WP_ROOT (the core directory; default Debian's /usr/share/wordpress).
 * Prints one line `DURABLE_JSON {...}` with the admin user and a fresh application password.
 */
$url                    = getenv( 'DURABLE_WP_URL' );
$_SERVER['WORDPRESS_CONFIG'] = getenv( 'WORDPRESS_CONFIG' );
$_SERVER['HTTP_HOST']   = parse_url( $url, PHP_URL_HOST ) . ':' . parse_url( $url, PHP_URL_PORT );
$_SERVER['SERVER_NAME'] = parse_url( $url, PHP_URL_HOST );
$_SERVER['REQUEST_URI'] = '/';
define( 'WP_INSTALLING', true );

// No mail transport on this machine: skip the "new site" e-mail (pluggable in upgrade.php).
function wp_new_blog_notification( $blog_title, $blog_url, $user_id, $password ) {}

require rtrim( getenv( 'DURABLE_WP_ROOT' ) ?: '/usr/share/wordpress', '/' ) . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';

if ( ! is_blog_installed() ) {
	$result = wp_install( 'Durable Steps test site', 'admin', 'admin@example.test', false, '', getenv( 'DURABLE_WP_ADMIN_PASSWORD' ) );
	$user_id = (int) $result['user_id'];
} else {
	$user_id = (int) get_user_by( 'login', 'admin' )->ID;
}
update_option( 'permalink_structure', '' );
if ( function_exists( 'durable_ops_install' ) ) {
	durable_ops_install();
}
list( $app_password ) = WP_Application_Passwords::create_new_application_password( $user_id, array( 'name' => 'durable-proxy-' . time() ) );
echo "\nDURABLE_JSON " . json_encode( array( 'user_id' => $user_id, 'user' => 'admin', 'app_password' => $app_password ) ) . "\n";
