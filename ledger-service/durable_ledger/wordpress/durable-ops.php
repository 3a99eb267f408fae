<?php
/**
 * Plugin Name: Durable Ops
 * Plugin URI: https://github.com/durable-steps/durable-steps
 * Description: Server-side idempotency (Idempotency-Key), per-job fencing tokens and lookup routes for the Durable Steps publishing proxy.
 * Version: 0.2.0
 * Requires at least: 6.1
 * Requires PHP: 8.0
 * Author: Durable Steps
 * License: MIT
 * Text Domain: durable-ops
 *
 * One source, two packagings (the version comes from the repository's VERSION file):
 * - must-use plugin: copy this file into WP_CONTENT_DIR/mu-plugins/ (tables are created on the
 *   first `init`);
 * - regular plugin: `make dist` builds dist/durable-ops-<version>.zip (this file, uninstall.php,
 *   readme.txt) to upload in wp-admin; activation creates the tables, uninstall drops them and
 *   the plugin's option.
 *
 * What it guarantees
 * - POST /wp/v2/posts and POST /wp/v2/media with an `Idempotency-Key` header create at most
 *   one object per key. The key is claimed by INSERT into a table with UNIQUE(op_key) before
 *   the controller writes anything; a duplicate replays the stored object (200 +
 *   `Idempotent-Replayed: true`), answers 409 `durable_in_progress` while the first request
 *   is still running, and 422 `durable_digest_mismatch` when the body differs.
 * - `_durable_operation_key` / `_durable_job_id` are written in the same wp_insert_post()
 *   call (meta_input), so a post whose response was lost is found again by key even if the
 *   claim row were lost.
 * - `X-Durable-Fencing-Token` + `X-Durable-Job-Id`: a per-job high-water mark; a write with a
 *   lower token than one already seen answers 409 `durable_stale_fencing_token` and writes
 *   nothing.
 * - GET /durable/v1/status, /durable/v1/operations/{key}, /durable/v1/jobs/{job_id}.
 * - Rank Math / Yoast SEO meta registered for REST writes.
 */

defined( 'ABSPATH' ) || exit;

/*
 * WordPress-Coding-Standards (WordPress-Extra) passes on this file except for one sniff, disabled
 * here on purpose: the table names interpolated into $wpdb->prepare() are $wpdb->prefix plus a
 * constant (durable_ops_table()), never input; the %i identifier placeholder that would replace
 * them needs WordPress 6.2 and this plugin supports 6.1. Every value goes through a placeholder.
 */
// phpcs:disable WordPress.DB.PreparedSQL.InterpolatedNotPrepared

const DURABLE_OPS_VERSION    = '0.2.0';
const DURABLE_OPS_DB_VERSION = '1';
const DURABLE_OPS_MAX_KEY    = 191; // utf8mb4 index limit for a UNIQUE varchar.

/* ------------------------------------------------------------------ tables */

function durable_ops_table( $name ) {
	global $wpdb;
	return $wpdb->prefix . 'durable_' . $name;
}

/** Creates/upgrades the two tables. Called by the launcher right after install, and lazily on init. */
function durable_ops_install() {
	global $wpdb;
	require_once ABSPATH . 'wp-admin/includes/upgrade.php';
	$charset = $wpdb->get_charset_collate();
	$ops     = durable_ops_table( 'operations' );
	$fence   = durable_ops_table( 'fences' );
	dbDelta(
		"CREATE TABLE $ops (
  id bigint(20) unsigned NOT NULL AUTO_INCREMENT,
  op_key varchar(191) NOT NULL,
  job_id varchar(191) NOT NULL DEFAULT '',
  request_hash char(64) NOT NULL,
  state varchar(16) NOT NULL,
  claim_id char(32) NOT NULL,
  object_type varchar(20) NOT NULL DEFAULT '',
  object_id bigint(20) unsigned NOT NULL DEFAULT 0,
  created_at datetime NOT NULL,
  updated_at datetime NOT NULL,
  PRIMARY KEY  (id),
  UNIQUE KEY op_key (op_key),
  KEY job_id (job_id)
) $charset;"
	);
	dbDelta(
		"CREATE TABLE $fence (
  job_id varchar(191) NOT NULL,
  hw bigint(20) unsigned NOT NULL DEFAULT 0,
  updated_at datetime NOT NULL,
  PRIMARY KEY  (job_id)
) $charset;"
	);
	update_option( 'durable_ops_db_version', DURABLE_OPS_DB_VERSION );
}

// Regular plugin: activation creates the tables (a no-op hook when loaded as a must-use plugin).
register_activation_hook( __FILE__, 'durable_ops_install' );

add_action(
	'init',
	function () {
		if ( get_option( 'durable_ops_db_version' ) !== DURABLE_OPS_DB_VERSION ) {
			durable_ops_install();
		}
	}
);

/* -------------------------------------------------------------- dispatch */

/*
 * Why `rest_dispatch_request` and not `rest_pre_dispatch`:
 * rest_pre_dispatch runs before the route is matched, before the arguments are validated and
 * before the route's permission_callback. Claiming a key there would let an unauthorised or
 * invalid request burn a key (and a later valid retry would be replayed/409'd against
 * nothing). WP_REST_Server::respond_to_request() applies rest_dispatch_request only after
 * has_valid_params()/sanitize_params() and the permission_callback passed, i.e. at the last
 * point before the controller writes. We then call the controller ourselves so the claim,
 * the write and the claim's completion bracket exactly one callback invocation.
 */
add_filter( 'rest_dispatch_request', 'durable_ops_dispatch', 10, 4 );

/** Maps a matched route + method to what we guard: 'post'/'attachment' creates, or fenced updates. */
function durable_ops_guarded( $route, $method ) {
	$creates = array(
		'/wp/v2/posts' => 'post',
		'/wp/v2/media' => 'attachment',
	);
	if ( 'POST' === $method && isset( $creates[ $route ] ) ) {
		return array( 'create', $creates[ $route ] );
	}
	if ( in_array( $method, array( 'POST', 'PUT', 'PATCH', 'DELETE' ), true )
		&& preg_match( '#^/wp/v2/(posts|media)/\(\?P<id>#', $route, $m ) ) {
		return array( 'update', 'posts' === $m[1] ? 'post' : 'attachment' );
	}
	return null;
}

function durable_ops_error( $code, $message, $status, $details = array() ) {
	return new WP_Error( $code, $message, array_merge( array( 'status' => $status ), $details ) );
}

function durable_ops_dispatch( $result, $request, $route, $handler ) {
	if ( null !== $result ) {
		return $result;
	}
	$guard = durable_ops_guarded( $route, $request->get_method() );
	if ( null === $guard ) {
		return null;
	}
	list( $kind, $type ) = $guard;

	$key       = trim( (string) $request->get_header( 'idempotency_key' ) );
	$job_id    = trim( (string) $request->get_header( 'x_durable_job_id' ) );
	$token_raw = $request->get_header( 'x_durable_fencing_token' );
	if ( 'create' !== $kind ) {
		$key = ''; // Updates are idempotent by nature; only fencing applies.
	}
	if ( '' === $key && null === $token_raw ) {
		return null; // Plain WordPress behaviour.
	}
	if ( strlen( $key ) > DURABLE_OPS_MAX_KEY || strlen( $job_id ) > DURABLE_OPS_MAX_KEY ) {
		return durable_ops_error( 'durable_bad_header', 'Idempotency-Key and X-Durable-Job-Id are limited to 191 bytes.', 400 );
	}

	$token = null;
	if ( null !== $token_raw ) {
		$token_raw = trim( (string) $token_raw );
		if ( '' === $job_id || ! ctype_digit( $token_raw ) ) {
			return durable_ops_error( 'durable_bad_header', 'X-Durable-Fencing-Token must be a non-negative integer sent with X-Durable-Job-Id.', 400 );
		}
		$token = (int) $token_raw;
		// Fast rejection before anything is claimed; re-checked under the job lock below.
		$hw = durable_ops_raise_fence( $job_id, $token );
		if ( $hw > $token ) {
			return durable_ops_stale( $token, $hw );
		}
	}

	$claim = null;
	if ( '' !== $key ) {
		$hash  = durable_ops_request_hash( $request, $type );
		$claim = durable_ops_claim( $key, $job_id, $hash, $type );
		if ( 'mismatch' === $claim['outcome'] ) {
			return durable_ops_error(
				'durable_digest_mismatch',
				'This Idempotency-Key was used with a different request body.',
				422,
				array(
					'details' => array(
						'stored_hash' => $claim['row']->request_hash,
						'given_hash'  => $hash,
					),
				)
			);
		}
		if ( 'in_progress' === $claim['outcome'] ) {
			return durable_ops_error( 'durable_in_progress', 'A request with this Idempotency-Key is still being processed.', 409 );
		}
		if ( 'done' === $claim['outcome'] ) {
			return durable_ops_replay( $claim['row'] );
		}
	}

	/*
	 * Fencing window. Without a lock:
	 *   A(token 3) checks hw=3 ok ......................... A writes   <- stale write lands last
	 *   B(token 4)            raises hw=4, checks ok, B writes
	 * A per-job MariaDB advisory lock makes "check hw, write" atomic against other fenced writes
	 * of the same job, so once B has written, A's re-check sees hw=4 and A writes nothing.
	 * The lock belongs to this DB connection; if PHP dies MariaDB releases it.
	 */
	$locked = false;
	if ( null !== $token ) {
		$locked = durable_ops_lock( $job_id );
		if ( ! $locked ) {
			durable_ops_release( $claim );
			return durable_ops_error( 'durable_in_progress', 'Another fenced write of this job is in progress.', 409 );
		}
		$hw = durable_ops_current_fence( $job_id );
		if ( $hw > $token ) {
			durable_ops_unlock( $job_id );
			durable_ops_release( $claim );
			return durable_ops_stale( $token, $hw );
		}
	}

	$GLOBALS['durable_ops_meta'][ spl_object_id( $request ) ] = array(
		'key'    => $key,
		'job_id' => $job_id,
	);
	try {
		$response = call_user_func( $handler['callback'], $request );
	} catch ( Throwable $e ) {
		$response = durable_ops_error( 'durable_internal_error', 'The write raised an exception.', 500 );
	} finally {
		unset( $GLOBALS['durable_ops_meta'][ spl_object_id( $request ) ] );
		if ( $locked ) {
			durable_ops_unlock( $job_id );
		}
	}

	if ( null !== $claim ) {
		$response_obj = rest_ensure_response( $response );
		$data         = is_wp_error( $response ) ? null : $response_obj->get_data();
		if ( is_wp_error( $response ) || $response_obj->get_status() >= 400 || empty( $data['id'] ) ) {
			/*
			 * An error response does not prove that nothing was written: the posts controller
			 * returns term or meta errors AFTER wp_insert_post() succeeded. If an object carries
			 * our key, the key is spent (a retry replays it); only otherwise free the key.
			 */
			$created = durable_ops_find_by_meta( $key );
			if ( $created ) {
				durable_ops_finish( $claim, $created->post_type, (int) $created->ID );
			} else {
				durable_ops_release( $claim );
			}
		} else {
			durable_ops_finish( $claim, $type, (int) $data['id'] );
		}
	}
	return $response;
}

function durable_ops_stale( $token, $hw ) {
	return durable_ops_error(
		'durable_stale_fencing_token',
		sprintf( 'Fencing token %d is older than the token %d already seen for this job.', $token, $hw ),
		409,
		array(
			'details' => array(
				'given'   => $token,
				'current' => $hw,
			),
		)
	);
}

/* ----------------------------------------------------------- meta_input */

/*
 * rest_pre_insert_{post_type} receives the stdClass that the controller casts to an array and
 * passes to wp_insert_post()/wp_insert_attachment() (which forwards to wp_insert_post()).
 * wp_insert_post() writes `meta_input` right after the row, in the same call.
 */
function durable_ops_add_meta( $prepared, $request ) {
	$ctx = $GLOBALS['durable_ops_meta'][ spl_object_id( $request ) ] ?? null;
	if ( null === $ctx || is_wp_error( $prepared ) || '' === $ctx['key'] ) {
		return $prepared;
	}
	$meta                           = isset( $prepared->meta_input ) ? (array) $prepared->meta_input : array();
	$meta['_durable_operation_key'] = $ctx['key'];
	if ( '' !== $ctx['job_id'] ) {
		$meta['_durable_job_id'] = $ctx['job_id'];
	}
	$prepared->meta_input = $meta;
	return $prepared;
}
add_filter( 'rest_pre_insert_post', 'durable_ops_add_meta', 10, 2 );
add_filter( 'rest_pre_insert_attachment', 'durable_ops_add_meta', 10, 2 );

/* ------------------------------------------------------------ hashing */

function durable_ops_ksort_deep( $value ) {
	if ( is_array( $value ) ) {
		ksort( $value );
		foreach ( $value as $k => $v ) {
			$value[ $k ] = durable_ops_ksort_deep( $v );
		}
	}
	return $value;
}

/**
 * Hash of what the caller asked for: JSON or form body, query parameters (minus routing), and for
 * media the uploaded bytes' sha256 and file name. Headers (fencing token, auth) are excluded on
 * purpose: a retry under a newer lease must still match the first attempt.
 */
function durable_ops_request_hash( $request, $type ) {
	$params = $request->get_json_params();
	if ( ! is_array( $params ) ) {
		$params = $request->get_body_params();
	}
	$query = array();
	foreach ( (array) $request->get_query_params() as $k => $v ) {
		if ( 'rest_route' !== $k && '_' !== substr( (string) $k, 0, 1 ) ) {
			$query[ $k ] = $v;
		}
	}
	$material = array(
		'type'   => $type,
		'params' => durable_ops_ksort_deep( (array) $params ),
		'query'  => durable_ops_ksort_deep( $query ),
	);
	if ( 'attachment' === $type ) {
		$files = $request->get_file_params();
		if ( ! empty( $files['file']['tmp_name'] ) && is_readable( $files['file']['tmp_name'] ) ) {
			$material['file'] = array(
				'name'   => (string) $files['file']['name'],
				'sha256' => hash_file( 'sha256', $files['file']['tmp_name'] ),
			);
		} else {
			$material['file'] = array(
				'disposition' => (string) $request->get_header( 'content_disposition' ),
				'sha256'      => hash( 'sha256', (string) $request->get_body() ),
			);
		}
	}
	return hash( 'sha256', wp_json_encode( $material, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE ) );
}

/* ------------------------------------------------------------- claims */

function durable_ops_now() {
	return gmdate( 'Y-m-d H:i:s' );
}

function durable_ops_get_row( $key ) {
	global $wpdb;
	$ops = durable_ops_table( 'operations' );
	return $wpdb->get_row( $wpdb->prepare( "SELECT * FROM $ops WHERE op_key = %s", $key ) );
}

/**
 * Claims $key by INSERT (never select-then-insert). Returns ['outcome' => claimed|done|in_progress|mismatch, 'row'].
 *
 * A claim left in state 'in_progress' by a worker that died mid-request would block the key forever;
 * after `durable_ops_claim_ttl` seconds (default 300) a newcomer first looks for an object
 * carrying the key in postmeta (the write did happen -> adopt it) and otherwise takes the claim
 * over with a conditional UPDATE on the old claim_id, so only one newcomer wins.
 */
function durable_ops_claim( $key, $job_id, $hash, $type ) {
	global $wpdb;
	$ops = durable_ops_table( 'operations' );
	for ( $attempt = 0; $attempt < 5; $attempt++ ) {
		$claim_id = bin2hex( random_bytes( 16 ) );
		$now      = durable_ops_now();
		$inserted = $wpdb->query(
			$wpdb->prepare(
				"INSERT IGNORE INTO $ops (op_key, job_id, request_hash, state, claim_id, object_type, created_at, updated_at) VALUES (%s, %s, %s, 'in_progress', %s, %s, %s, %s)",
				$key,
				$job_id,
				$hash,
				$claim_id,
				$type,
				$now,
				$now
			)
		);
		if ( 1 === $inserted ) {
			return array(
				'outcome'  => 'claimed',
				'row'      => durable_ops_get_row( $key ),
				'claim_id' => $claim_id,
				'key'      => $key,
			);
		}
		$row = durable_ops_get_row( $key );
		if ( null === $row ) {
			continue; // The holder released it between our INSERT and SELECT: try again.
		}
		if ( $row->request_hash !== $hash ) {
			return array(
				'outcome' => 'mismatch',
				'row'     => $row,
			);
		}
		if ( 'done' === $row->state ) {
			return array(
				'outcome' => 'done',
				'row'     => $row,
			);
		}
		$ttl = (int) apply_filters( 'durable_ops_claim_ttl', 300 );
		if ( time() - strtotime( $row->updated_at . ' UTC' ) < $ttl ) {
			return array(
				'outcome' => 'in_progress',
				'row'     => $row,
			);
		}
		$found = durable_ops_find_by_meta( $key );
		if ( $found ) {
			$wpdb->query( $wpdb->prepare( "UPDATE $ops SET state = 'done', object_type = %s, object_id = %d, updated_at = %s WHERE op_key = %s", $found->post_type, $found->ID, $now, $key ) );
			return array(
				'outcome' => 'done',
				'row'     => durable_ops_get_row( $key ),
			);
		}
		$taken = $wpdb->query( $wpdb->prepare( "UPDATE $ops SET claim_id = %s, updated_at = %s WHERE op_key = %s AND claim_id = %s AND state = 'in_progress'", $claim_id, $now, $key, $row->claim_id ) );
		if ( 1 === $taken ) {
			return array(
				'outcome'  => 'claimed',
				'row'      => durable_ops_get_row( $key ),
				'claim_id' => $claim_id,
				'key'      => $key,
			);
		}
		return array(
			'outcome' => 'in_progress',
			'row'     => $row,
		);
	}
	return array(
		'outcome' => 'in_progress',
		'row'     => durable_ops_get_row( $key ),
	);
}

function durable_ops_release( $claim ) {
	global $wpdb;
	if ( empty( $claim['claim_id'] ) ) {
		return;
	}
	$ops = durable_ops_table( 'operations' );
	$wpdb->query( $wpdb->prepare( "DELETE FROM $ops WHERE op_key = %s AND claim_id = %s AND state = 'in_progress'", $claim['key'], $claim['claim_id'] ) );
}

function durable_ops_finish( $claim, $type, $object_id ) {
	global $wpdb;
	$ops = durable_ops_table( 'operations' );
	$wpdb->query( $wpdb->prepare( "UPDATE $ops SET state = 'done', object_type = %s, object_id = %d, updated_at = %s WHERE op_key = %s AND claim_id = %s", $type, $object_id, durable_ops_now(), $claim['key'], $claim['claim_id'] ) );
}

function durable_ops_rest_path( $type, $id ) {
	return ( 'attachment' === $type ? '/wp/v2/media/' : '/wp/v2/posts/' ) . (int) $id;
}

/** Answers a duplicate with the stored object, read fresh through the REST server itself. */
function durable_ops_replay( $row ) {
	$get = new WP_REST_Request( 'GET', durable_ops_rest_path( $row->object_type, $row->object_id ) );
	$get->set_param( 'context', 'edit' );
	$response = rest_do_request( $get );
	if ( $response->is_error() ) {
		return durable_ops_error(
			'durable_object_missing',
			'This Idempotency-Key already created an object that can no longer be read.',
			409,
			array(
				'details' => array(
					'object_type' => $row->object_type,
					'id'          => (int) $row->object_id,
				),
			)
		);
	}
	$response->set_status( 200 );
	$response->header( 'Idempotent-Replayed', 'true' );
	return $response;
}

/* ------------------------------------------------------------ fencing */

/** Raises the job's high-water mark to at least $token atomically and returns the current mark. */
function durable_ops_raise_fence( $job_id, $token ) {
	global $wpdb;
	$fence = durable_ops_table( 'fences' );
	$wpdb->query( $wpdb->prepare( "INSERT INTO $fence (job_id, hw, updated_at) VALUES (%s, %d, %s) ON DUPLICATE KEY UPDATE hw = GREATEST(hw, VALUES(hw)), updated_at = VALUES(updated_at)", $job_id, $token, durable_ops_now() ) );
	return durable_ops_current_fence( $job_id );
}

function durable_ops_current_fence( $job_id ) {
	global $wpdb;
	$fence = durable_ops_table( 'fences' );
	return (int) $wpdb->get_var( $wpdb->prepare( "SELECT hw FROM $fence WHERE job_id = %s", $job_id ) );
}

function durable_ops_lock_name( $job_id ) {
	global $wpdb;
	return 'durable_ops_' . md5( $wpdb->prefix . $job_id );
}

function durable_ops_lock( $job_id ) {
	global $wpdb;
	return '1' === (string) $wpdb->get_var( $wpdb->prepare( 'SELECT GET_LOCK(%s, %d)', durable_ops_lock_name( $job_id ), 20 ) );
}

function durable_ops_unlock( $job_id ) {
	global $wpdb;
	$wpdb->get_var( $wpdb->prepare( 'SELECT RELEASE_LOCK(%s)', durable_ops_lock_name( $job_id ) ) );
}

/* ------------------------------------------------------------ lookups */

function durable_ops_find_by_meta( $key ) {
	global $wpdb;
	return $wpdb->get_row(
		$wpdb->prepare(
			"SELECT p.ID, p.post_type, p.post_status FROM $wpdb->posts p JOIN $wpdb->postmeta m ON m.post_id = p.ID WHERE m.meta_key = '_durable_operation_key' AND m.meta_value = %s ORDER BY p.ID ASC LIMIT 1",
			$key
		)
	);
}

function durable_ops_lookup_operation( WP_REST_Request $request ) {
	$key  = (string) $request['key'];
	$row  = durable_ops_get_row( $key );
	$out  = array(
		'found'        => false,
		'key'          => $key,
		'object_type'  => null,
		'id'           => null,
		'status'       => null,
		'request_hash' => $row ? $row->request_hash : null,
		'state'        => $row ? $row->state : null,
		'job_id'       => $row ? $row->job_id : null,
		'source'       => null,
	);
	$post = null;
	if ( $row && 'done' === $row->state && $row->object_id ) {
		$post          = get_post( (int) $row->object_id );
		$out['source'] = 'table';
	}
	if ( ! $post ) {
		// Table row missing or still 'in_progress' (worker died after wp_insert_post): the meta is the truth.
		$meta = durable_ops_find_by_meta( $key );
		if ( $meta ) {
			$post          = get_post( (int) $meta->ID );
			$out['source'] = 'meta';
		}
	}
	if ( $post ) {
		$out['found']       = true;
		$out['object_type'] = $post->post_type;
		$out['id']          = (int) $post->ID;
		$out['status']      = $post->post_status;
		$out['job_id']      = $out['job_id'] ? $out['job_id'] : (string) get_post_meta( $post->ID, '_durable_job_id', true );
	}
	return rest_ensure_response( $out );
}

function durable_ops_lookup_job( WP_REST_Request $request ) {
	global $wpdb;
	$job_id  = (string) $request['job_id'];
	$rows    = $wpdb->get_results(
		$wpdb->prepare(
			"SELECT p.ID, p.post_type, p.post_status, p.post_title, p.post_date_gmt, p.guid, k.meta_value AS op_key FROM $wpdb->posts p JOIN $wpdb->postmeta j ON j.post_id = p.ID AND j.meta_key = '_durable_job_id' LEFT JOIN $wpdb->postmeta k ON k.post_id = p.ID AND k.meta_key = '_durable_operation_key' WHERE j.meta_value = %s ORDER BY p.ID ASC",
			$job_id
		)
	);
	$objects = array();
	foreach ( $rows as $r ) {
		$objects[] = array(
			'id'            => (int) $r->ID,
			'object_type'   => $r->post_type,
			'status'        => $r->post_status,
			'title'         => $r->post_title,
			'operation_key' => $r->op_key,
			'date_gmt'      => $r->post_date_gmt,
			'source_url'    => 'attachment' === $r->post_type ? wp_get_attachment_url( (int) $r->ID ) : null,
		);
	}
	$ops        = durable_ops_table( 'operations' );
	$operations = array();
	foreach ( $wpdb->get_results( $wpdb->prepare( "SELECT op_key, state, object_type, object_id, request_hash, updated_at FROM $ops WHERE job_id = %s ORDER BY id ASC", $job_id ) ) as $o ) {
		$operations[] = array(
			'key'          => $o->op_key,
			'state'        => $o->state,
			'object_type'  => $o->object_type,
			'id'           => (int) $o->object_id ? (int) $o->object_id : null,
			'request_hash' => $o->request_hash,
			'updated_at'   => $o->updated_at,
		);
	}
	return rest_ensure_response(
		array(
			'job_id'        => $job_id,
			'fencing_token' => durable_ops_current_fence( $job_id ),
			'objects'       => $objects,
			'operations'    => $operations,
		)
	);
}

function durable_ops_can_read() {
	return current_user_can( 'edit_posts' );
}

/** Route argument schema for an operation key or job id: a non-empty string of at most 191 bytes, kept verbatim. */
function durable_ops_identifier_arg() {
	return array(
		'type'              => 'string',
		'required'          => true,
		'validate_callback' => function ( $value ) {
			return is_string( $value ) && '' !== $value && strlen( $value ) <= DURABLE_OPS_MAX_KEY
				? true
				: new WP_Error( 'rest_invalid_param', 'Expected a non-empty identifier of at most 191 bytes.', array( 'status' => 400 ) );
		},
		// Keys are compared byte for byte with what the proxy stored: no text sanitising, only a string cast.
		'sanitize_callback' => function ( $value ) {
			return (string) $value;
		},
	);
}

add_action(
	'rest_api_init',
	function () {
		register_rest_route(
			'durable/v1',
			'/status',
			array(
				'methods'             => 'GET',
				'permission_callback' => 'durable_ops_can_read',
				'callback'            => function () {
					return rest_ensure_response(
						array(
							'plugin'     => 'durable-ops',
							'version'    => DURABLE_OPS_VERSION,
							'db_version' => get_option( 'durable_ops_db_version' ),
						)
					);
				},
			)
		);
		register_rest_route(
			'durable/v1',
			'/operations/(?P<key>.+)',
			array(
				'methods'             => 'GET',
				'permission_callback' => 'durable_ops_can_read',
				'args'                => array( 'key' => durable_ops_identifier_arg() ),
				'callback'            => 'durable_ops_lookup_operation',
			)
		);
		register_rest_route(
			'durable/v1',
			'/jobs/(?P<job_id>.+)',
			array(
				'methods'             => 'GET',
				'permission_callback' => 'durable_ops_can_read',
				'args'                => array( 'job_id' => durable_ops_identifier_arg() ),
				'callback'            => 'durable_ops_lookup_job',
			)
		);
	}
);

/* ----------------------------------------------------------- SEO meta */

add_action(
	'init',
	function () {
		$keys = array(
			'rank_math_title',
			'rank_math_description',
			'rank_math_focus_keyword',
			'_yoast_wpseo_title',
			'_yoast_wpseo_metadesc',
			'_yoast_wpseo_focuskw',
		);
		foreach ( array( 'post', 'page' ) as $post_type ) {
			foreach ( $keys as $key ) {
				register_post_meta(
					$post_type,
					$key,
					array(
						'type'          => 'string',
						'single'        => true,
						'show_in_rest'  => true,
						'auth_callback' => function ( $allowed, $meta_key, $post_id, $user_id ) {
							return user_can( $user_id, 'edit_post', $post_id );
						},
					)
				);
			}
		}
	}
);
