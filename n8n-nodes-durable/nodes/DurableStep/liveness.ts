import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { sleep } from 'n8n-workflow';
import { jobPath, ledgerSend, type LedgerSent } from './transport';

/**
 * The holder's liveness (the ledger's side is jobs/leases.py). Temporal's activity
 * heartbeats are the model: while a Durable Step node works under a lease (a gated request or
 * sub-workflow in flight, a lookup), it tells the ledger every HEARTBEAT_MS that it is working for
 * LIVE_S more seconds. A second execution of the same job (a webhook fired twice) then waits for
 * it instead of fencing it out, and a holder that died (kill -9, a frozen worker) stops beating:
 * its liveness lapses at most LIVE_S after its last beat, and the next Start Job takes over.
 *
 * LIVE_S is four heartbeats: a beat lost to a slow ledger or a busy event loop does not make a
 * working holder look dead. When a node ends, it leaves HANDOVER_S: enough for n8n to start the
 * next node of the same execution (milliseconds), short enough that a waiting duplicate goes on
 * soon after the holder's step is done.
 */
export const HEARTBEAT_MS = 2500;
export const LIVE_S = 10;
export const HANDOVER_S = 3;
/** Node version from which Start Job waits for a live holder and gated nodes beat. */
export const LIVENESS_FROM = 1.4;
/** How often a waiting Start Job asks again. */
export const POLL_MS = 500;

export interface Holder {
	jobId: string;
	owner: string;
	token: number;
}

/** The lease a gated item works under: Start Job's fields on the item, else this execution's default owner. */
export function holderOf(ctx: IExecuteFunctions, json: IDataObject, jobId: string, token: number): Holder {
	const lease = (json.lease as IDataObject | undefined) ?? {};
	const owner =
		typeof lease.owner === 'string' && lease.fencing_token === token
			? lease.owner
			: `n8n-exec-${String(ctx.getExecutionId?.() ?? '')}`;
	return { jobId, owner, token };
}

/** One heartbeat; its failure changes nothing (the next ledger call is fenced anyway). True if held. */
export async function beat(ctx: IExecuteFunctions, h: Holder, liveS: number): Promise<boolean> {
	const body = { owner: h.owner, fencing_token: h.token, live_s: liveS };
	const sent = await ledgerSend(ctx, 'POST', jobPath(h.jobId, '/lease/renew'), body, 0).catch(() => null);
	return sent !== null && 'answer' in sent && sent.answer.ok;
}

/**
 * The heartbeats that rode on a begin or a confirm of this node execution (job and token ->
 * live_s), so that Begin Step's and Record Outcome's beats after the fact (router.ts) are not sent
 * a second time.
 */
const carriedBeats = new WeakMap<object, Map<string, number>>();

export function noteCarried(ctx: IExecuteFunctions, jobId: string, token: number, liveS: number): void {
	let beats = carriedBeats.get(ctx);
	if (beats === undefined) carriedBeats.set(ctx, (beats = new Map()));
	beats.set(`${jobId}\u0000${token}`, liveS);
}

export function wasCarried(ctx: IExecuteFunctions, jobId: string, token: number, liveS: number): boolean {
	return carriedBeats.get(ctx)?.get(`${jobId}\u0000${token}`) === liveS;
}

/** A call refused only because the ledger does not know `heartbeat` (a ledger before it): 422 naming it alone. */
function heartbeatUnknown(sent: LedgerSent): boolean {
	if (!('answer' in sent) || sent.answer.ok || sent.answer.refusal.code !== 'validation_error') return false;
	const fields = (sent.answer.refusal.details.fields ?? {}) as IDataObject;
	return Object.keys(fields).length === 1 && fields.heartbeat !== undefined;
}

export interface Carrying {
	sent: LedgerSent;
	/** The ledger takes heartbeats in calls (its answer has `heartbeat`). */
	supported: boolean;
	/** The beat landed: the lease is this holder's, live for ``live_s`` from now. */
	held: boolean;
}

/**
 * A begin or a confirm carrying the holder's heartbeat (`heartbeat: {owner, live_s}`): the ledger
 * renews the lease after the call's own work, in its round trip, instead of in a renew of its own.
 * A ledger without the field refuses it (422): the call is then sent again without it, and the
 * caller beats on the renew route as before.
 */
export async function sendCarrying(
	ctx: IExecuteFunctions,
	path: string,
	body: IDataObject,
	owner: string,
	liveS: number,
	i: number,
): Promise<Carrying> {
	let sent = await ledgerSend(ctx, 'POST', path, { ...body, heartbeat: { owner, live_s: liveS } }, i);
	if (heartbeatUnknown(sent)) sent = await ledgerSend(ctx, 'POST', path, body, i);
	const beat = 'answer' in sent && sent.answer.ok ? (sent.answer.body.heartbeat as IDataObject | undefined) : undefined;
	return { sent, supported: beat !== undefined, held: beat?.held === true };
}

/**
 * The beats of one node's work. The first beat (LIVE_S) is sent by `beginBeating` at once, or was
 * carried by the begin itself (``firstCarried``: the ledger renewed the lease in the begin's round
 * trip). ``handOver`` stops the beats and leaves the holders live for HANDOVER_S: by a beat of its
 * own (sent beside the outcome's request), or ``carried`` by the outcome's request; it resolves
 * once no LIVE_S beat is in flight, so that none can land after the handover and stretch it.
 */
export interface Beats {
	/** The first beat has been answered (or failed: a beat's failure changes nothing). */
	ready: Promise<unknown>;
	handOver(carried?: boolean): Promise<void>;
	/** Awaited by `whileBeating`: the handover, by the node's end at the latest. */
	done(): Promise<void>;
}

export function beginBeating(ctx: IExecuteFunctions, holders: Holder[], firstCarried = false): Beats {
	const beatAll = async (liveS: number) => await Promise.all(holders.map(async (h) => await beat(ctx, h, liveS)));
	let stopped = holders.length === 0;
	const first: Promise<unknown> = stopped || firstCarried ? Promise.resolve() : beatAll(LIVE_S);
	let inflight = first;
	let quiet: Promise<void> | undefined;
	let handover: Promise<unknown> | undefined;
	// The loop is not awaited at the end (that would cost up to a slice per node): it sees
	// `stopped` within a slice and stops.
	void (async () => {
		await first;
		let since = 0;
		while (!stopped) {
			await sleep(100);
			since += 100;
			if (!stopped && since >= HEARTBEAT_MS) {
				since = 0;
				inflight = beatAll(LIVE_S);
				await inflight;
			}
		}
	})();
	const handOver = async (carried = false) => {
		if (quiet === undefined && holders.length > 0) {
			stopped = true;
			quiet = inflight.then(
				() => undefined,
				() => undefined,
			);
			handover = carried ? quiet : quiet.then(async () => await beatAll(HANDOVER_S));
		}
		await quiet;
	};
	return {
		ready: first,
		handOver,
		done: async () => {
			await first;
			await handOver();
			await handover;
		},
	};
}

/**
 * Runs ``work`` while beating for ``holders`` every HEARTBEAT_MS; at its end (or when the work
 * calls ``beats.handOver()``) leaves them live for HANDOVER_S. The work starts once the first beat
 * has landed: a holder that works is live while it works. ``started``: the beats `beginBeating`
 * began with the begin (its first beat carried by the begin, or sent beside it).
 */
export async function whileBeating<T>(
	ctx: IExecuteFunctions,
	holders: Holder[],
	work: (beats: Beats) => Promise<T>,
	started?: Beats,
): Promise<T> {
	const beats = started ?? beginBeating(ctx, holders);
	try {
		await beats.ready;
		return await work(beats);
	} finally {
		await beats.done();
	}
}
