<?php
/*
 * The regular durable-ops plugin through WordPress's own plugin API, as wp-admin does it.
 *   php plugin.php install ZIP   Plugin_Upgrader::install(ZIP) ("Upload Plugin"), then activate_plugin()
 *   php plugin.php status        active plugins, mu-plugins, the plugin's tables and options
 *   php plugin.php uninstall     deactivate_plugins() + delete_plugins() ("Deactivate", then "Delete":
 *                                WordPress runs the plugin's uninstall.php and removes its files)
 * Env: WORDPRESS_CONFIG, DURABLE_WP_URL, DURABLE_WP_ROOT. Prints one line `DURABLE_JSON {...}`.
 */
$url                         = getenv( 'DURABLE_WP_URL' );
$_SERVER['WORDPRESS_CONFIG'] = getenv( 'WORDPRESS_CONFIG' );
$_SERVER['HTTP_HOST']        = parse_url( $url, PHP_URL_HOST ) . ':' . parse_url( $url, PHP_URL_PORT );
$_SERVER['SERVER_NAME']      = parse_url( $url, PHP_URL_HOST );
$_SERVER['REQUEST_URI']      = '/wp-admin/plugins.php';

require rtrim( getenv( 'DURABLE_WP_ROOT' ) ?: '/usr/share/wordpress', '/' ) . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/admin.php';
require_once ABSPATH . 'wp-admin/includes/class-wp-upgrader.php';

const DURABLE_PLUGIN_FILE = 'durable-ops/durable-ops.php';

// wp-admin runs these as an administrator; so do we (the capability checks in core then pass).
wp_set_current_user( (int) get_user_by( 'login', 'admin' )->ID );

function durable_out( $data, $code = 0 ) {
	echo "\nDURABLE_JSON " . wp_json_encode( $data ) . "\n";
	exit( $code );
}

function durable_state() {
	global $wpdb;
	wp_cache_flush();
	$tables  = $wpdb->get_col( $wpdb->prepare( 'SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE %s', $wpdb->esc_like( $wpdb->prefix . 'durable_' ) . '%' ) );
	$options = $wpdb->get_col( "SELECT option_name FROM $wpdb->options WHERE option_name LIKE '%durable%'" );
	return array(
		'plugin'         => DURABLE_PLUGIN_FILE,
		'installed'      => file_exists( WP_PLUGIN_DIR . '/' . DURABLE_PLUGIN_FILE ),
		'active'         => is_plugin_active( DURABLE_PLUGIN_FILE ),
		'active_plugins' => array_values( (array) get_option( 'active_plugins', array() ) ),
		'mu_plugins'     => array_keys( get_mu_plugins() ),
		'header'         => file_exists( WP_PLUGIN_DIR . '/' . DURABLE_PLUGIN_FILE ) ? get_plugin_data( WP_PLUGIN_DIR . '/' . DURABLE_PLUGIN_FILE, false, false ) : null,
		'tables'         => $tables,
		'options'        => $options,
		'wp_version'     => get_bloginfo( 'version' ),
	);
}

$action = $argv[1] ?? 'status';
if ( 'install' === $action ) {
	$zip = $argv[2] ?? '';
	if ( ! is_file( $zip ) ) {
		durable_out( array( 'error' => "no such zip: $zip" ), 1 );
	}
	// Upgrader deletes packages it downloaded, never a local file; a copy keeps dist/ out of it anyway.
	$package = wp_tempnam( basename( $zip ) );
	copy( $zip, $package );
	$skin      = new WP_Ajax_Upgrader_Skin();
	$upgrader  = new Plugin_Upgrader( $skin );
	$installed = $upgrader->install( $package );
	@unlink( $package );
	if ( true !== $installed ) {
		$err = is_wp_error( $installed ) ? $installed->get_error_message() : implode( '; ', $skin->get_error_messages() );
		durable_out( array( 'error' => 'install failed: ' . $err, 'messages' => $skin->get_upgrade_messages() ), 1 );
	}
	$file     = $upgrader->plugin_info();
	$activate = activate_plugin( $file );
	if ( is_wp_error( $activate ) ) {
		durable_out( array( 'error' => 'activation failed: ' . $activate->get_error_message() ), 1 );
	}
	durable_out( array_merge( durable_state(), array( 'installed_as' => $file ) ) );
} elseif ( 'uninstall' === $action ) {
	deactivate_plugins( array( DURABLE_PLUGIN_FILE ) );
	$deleted = delete_plugins( array( DURABLE_PLUGIN_FILE ) );
	if ( true !== $deleted ) {
		durable_out( array( 'error' => 'delete failed: ' . ( is_wp_error( $deleted ) ? $deleted->get_error_message() : var_export( $deleted, true ) ) ), 1 );
	}
	durable_out( durable_state() );
} else {
	durable_out( durable_state() );
}
