<?php
/**
 * Durable Ops uninstall (regular plugin only; WordPress runs this file when the plugin is deleted).
 *
 * Drops the plugin's two tables and its option on every site of the installation. Left in place
 * on purpose: the `_durable_operation_key` / `_durable_job_id` post meta on posts and media the
 * plugin guarded; that meta belongs to the content (it is how an operator proves which job wrote
 * which post) and goes away with the posts themselves.
 *
 * @package durable-ops
 */

defined( 'WP_UNINSTALL_PLUGIN' ) || exit;

/** Drops this site's tables and option (the current blog's table prefix). */
function durable_ops_uninstall_site() {
	global $wpdb;
	foreach ( array( 'operations', 'fences' ) as $durable_ops_name ) {
		$durable_ops_table = $wpdb->prefix . 'durable_' . $durable_ops_name;
		// Table names cannot be placeholders; the name is built from the prefix and a constant.
		$wpdb->query( "DROP TABLE IF EXISTS `$durable_ops_table`" ); // phpcs:ignore WordPress.DB.PreparedSQL.InterpolatedNotPrepared, WordPress.DB.DirectDatabaseQuery
	}
	delete_option( 'durable_ops_db_version' );
}

if ( is_multisite() ) {
	foreach ( get_sites(
		array(
			'fields' => 'ids',
			'number' => 0,
		)
	) as $durable_ops_blog_id ) {
		switch_to_blog( $durable_ops_blog_id );
		durable_ops_uninstall_site();
		restore_current_blog();
	}
} else {
	durable_ops_uninstall_site();
}
