<?php
/*
 * Router for `php -S` serving one throwaway Debian WordPress instance.
 * Several instances share one core directory (/usr/share/wordpress or a cached newer core, `-t`); each php -S process picks its own
 * /etc/wordpress/config-<DURABLE_WP_CONFIG>.php (Debian's wp-config.php honours
 * $_SERVER['WORDPRESS_CONFIG']) and serves /wp-content/ from its own WP_CONTENT_DIR.
 */
$_SERVER['WORDPRESS_CONFIG'] = getenv( 'DURABLE_WP_CONFIG' );
$durable_path    = rawurldecode( (string) parse_url( $_SERVER['REQUEST_URI'], PHP_URL_PATH ) );
$durable_docroot = rtrim( $_SERVER['DOCUMENT_ROOT'], '/' );

if ( str_starts_with( $durable_path, '/wp-content/' ) ) {
	$durable_base = realpath( getenv( 'DURABLE_WP_CONTENT_DIR' ) );
	$durable_file = realpath( $durable_base . substr( $durable_path, strlen( '/wp-content' ) ) );
	if ( $durable_file && str_starts_with( $durable_file, $durable_base . '/' ) && is_file( $durable_file )
		&& ! str_ends_with( $durable_file, '.php' ) ) {
		$durable_types = array( 'png' => 'image/png', 'jpg' => 'image/jpeg', 'jpeg' => 'image/jpeg', 'gif' => 'image/gif', 'webp' => 'image/webp', 'css' => 'text/css', 'js' => 'application/javascript', 'txt' => 'text/plain' );
		$durable_ext   = strtolower( pathinfo( $durable_file, PATHINFO_EXTENSION ) );
		header( 'Content-Type: ' . ( $durable_types[ $durable_ext ] ?? 'application/octet-stream' ) );
		header( 'Content-Length: ' . filesize( $durable_file ) );
		readfile( $durable_file );
		return true;
	}
	http_response_code( 404 );
	return true;
}

$durable_file = $durable_docroot . $durable_path;
if ( is_file( $durable_file ) && ! str_ends_with( $durable_file, '.php' ) ) {
	return false; // Core static asset: let the built-in server send it.
}
if ( is_dir( $durable_file ) && is_file( rtrim( $durable_file, '/' ) . '/index.php' ) ) {
	$durable_file = rtrim( $durable_file, '/' ) . '/index.php';
}
if ( ! is_file( $durable_file ) ) {
	$durable_file = $durable_docroot . '/index.php';
}
$_SERVER['SCRIPT_FILENAME'] = $durable_file;
$_SERVER['SCRIPT_NAME']     = substr( $durable_file, strlen( $durable_docroot ) );
$_SERVER['PHP_SELF']        = $_SERVER['SCRIPT_NAME'];
chdir( dirname( $durable_file ) );
require $durable_file;
