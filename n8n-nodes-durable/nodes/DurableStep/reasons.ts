/**
 * The one list of reason codes on Needs Attention / Look Up items and what they mean to the
 * user (`durable.explanation`).
 *
 * The ledger words its own decisions: it sends `reason` and `message` with every halt and
 * reconcile answer, and `error.code` and `error.message` with every refusal. Those messages are
 * what users read (`explain`). This list is used when the ledger sent no message (an older
 * ledger, an answer without one), and for what the node decides itself (`explainOwn`).
 *
 * The codes are the ledger's (ledger-service/durable_ledger/kernel/states.py `MESSAGES`, and the
 * gate's halts for a used-up budget or a halted job), plus the node's own; test/reasons.test.mjs
 * checks that every code the ledger can send has an entry.
 */

const AWAITING_EDITOR =
	'An earlier attempt of this step could not be reconciled automatically; it waits for an editor decision in the review queue. Nothing was repeated.';

export const REASONS: Readonly<Record<string, string>> = {
	// The gate's decisions (halt, reconcile, needs_review), under the ledger's codes.
	in_flight:
		'An earlier attempt of this step was sent and its outcome was never recorded; the ledger must reconcile it with the remote system before anything is retried. Nothing was repeated.',
	outcome_unknown:
		'The side effect was sent but its result is unknown (timeout, connection reset, 5xx). The next run reconciles it before anything is repeated (Look Up, or the review queue).',
	failed_permanently: 'The side effect failed with an error that retrying cannot fix; the step will not be tried again.',
	retry_budget_exhausted: 'The step failed and its retry budget is used up.',
	awaiting_editor: AWAITING_EDITOR,
	abandoned: 'An editor decided this step must not be done.',
	approval_required: 'The step needs an approval of this exact payload by an approver before it may run.',
	approval_denied:
		'An approver denied this exact payload; nothing was done. Change the content (and bump the job task version) or ask the approver again.',
	cancelled: 'The job was cancelled; no further side effects are allowed.',
	halted: 'The job is halted; no further side effects are allowed until it is resumed.',
	authorization_revoked:
		'The remote system refused the credentials (401/403); the job is halted until they are fixed. Nothing will be retried automatically.',
	policy_changed:
		"The job's policy (tools, scopes) changed since it was approved; it is halted until it is approved again.",
	budget_exhausted: "The job's budget is used up.",
	backoff:
		'The previous attempt failed only moments ago; the ledger holds the next attempt back for a while. Run the workflow again later.',
	reconcile_in_progress:
		'Another run is reconciling this step with the remote system right now; nothing was repeated. Run the workflow again shortly.',
	reconcile_failed:
		'The ledger could not ask the remote system about the earlier attempt (network or server error); the step stays as it was and nothing was repeated. Run the workflow again later.',

	// Refusals the node routes to Needs Attention instead of failing, under the ledger's error codes.
	digest_mismatch:
		'This step was already begun with a different payload. Either the content really changed (bump the job task version) or the payload expression is not deterministic (timestamps, random IDs): make it stable.',
	action_mismatch:
		'This operation key was already begun for another action. An operation key names one side effect: give this step its own key (or leave Operation Key empty for the default).',
	target_mismatch:
		'This operation key was already begun for another target (site, endpoint). Give this step its own key, or send the target it was begun with.',
	job_mismatch:
		'This operation key belongs to another job. Operation keys are unique per tenant: include the job ID in the key, or leave Operation Key empty for the default.',
	stale_fencing_token:
		"Another execution took over this job's lease after this one started. This execution must stop; the newer one continues.",
	execution_mismatch:
		"This outcome was reported by another n8n execution than the one that began the step (n8n's Retry of an execution runs as a new execution and repeats the nodes after Begin Step, so the side effect may have happened twice). The ledger kept this result as evidence and did not mark the step done: check the remote system for a second object, then settle the step in the review queue.",

	// The node's own codes.
	needs_review: AWAITING_EDITOR,
	lookup_required:
		'An earlier attempt of this step was sent but its outcome was never recorded, and the ledger has no reconciler for this action. Look the object up by durable.operation_key (the key you stamped on it), then report found / absent / undecidable with Durable Step: Report Lookup. Nothing was repeated.',
	lookup_not_applied:
		'Report Lookup was for an attempt that is no longer the one in flight (another run moved this step on), so the ledger changed nothing. Run the workflow again: Begin Step asks for a lookup of the current attempt.',
	in_flight_lookup:
		'Another execution sent this step moments ago and its request may still be on its way, so a lookup that finds nothing proves nothing yet. Nothing was sent; the next run (after the request\'s timeout) looks again and finds the object or sends the step.',
	lookup_failed:
		'The side effect was sent but its result is unknown, and the lookup that would settle it failed itself (no answer, or an error status): that proves nothing, so the ledger was told nothing and the step stays unknown. The next run (or n8n\'s Retry) looks it up again; nothing is resent.',
	failed:
		'The side effect failed and the ledger recorded that nothing was written; the next run of this workflow tries it again (the gate counts the attempts).',
};

function ledgerWords(message: unknown): string {
	return typeof message === 'string' && message ? message : '';
}

function listed(reason: string): string {
	return REASONS[reason] ?? `The ledger stopped this step (${reason}).`;
}

/**
 * A ledger decision or refusal passed on as it is: the ledger's message, the list without one.
 * A message that only repeats the code is none: the ledger answers a reason it has no words for
 * (a halt reason outside its MESSAGES) with the code itself.
 */
export function explain(reason: string, ledgerMessage?: unknown): string {
	const fromLedger = ledgerWords(ledgerMessage);
	return fromLedger && fromLedger !== reason ? fromLedger : listed(reason);
}

/**
 * What the node decided itself: the Look Up route, a lookup the ledger did not apply, a refusal
 * routed to Needs Attention instead of failing the node, Record Outcome's verdict. The ledger's
 * words describe its request, not the workflow, so they follow the list's n8n instructions.
 */
export function explainOwn(reason: string, ledgerMessage?: unknown): string {
	const fromLedger = ledgerWords(ledgerMessage);
	return fromLedger ? `${listed(reason)} (ledger: ${fromLedger})` : listed(reason);
}
