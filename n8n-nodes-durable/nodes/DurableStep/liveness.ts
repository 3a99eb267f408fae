import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { sleep } from 'n8n-workflow';
import { jobPath, ledgerSend } from './transport';

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
 * Runs ``work`` while beating for ``holders`` every HEARTBEAT_MS; at its end leaves them live for
 * HANDOVER_S. The loop sleeps in short slices so that it ends with the work, not a beat later.
 */
export async function whileBeating<T>(ctx: IExecuteFunctions, holders: Holder[], work: () => Promise<T>): Promise<T> {
	if (holders.length === 0) return await work();
	let done = false;
	let inflight: Promise<unknown> = Promise.all(holders.map(async (h) => await beat(ctx, h, LIVE_S)));
	await inflight;
	// The loop is not awaited at the end (that would cost up to a slice per node): it sees `done`
	// within a slice and stops; only a beat already on its way is awaited, so that it cannot land
	// after the handover beat and stretch the handover to LIVE_S.
	void (async () => {
		let since = 0;
		while (!done) {
			await sleep(100);
			since += 100;
			if (!done && since >= HEARTBEAT_MS) {
				since = 0;
				inflight = Promise.all(holders.map(async (h) => await beat(ctx, h, LIVE_S)));
				await inflight;
			}
		}
	})();
	try {
		return await work();
	} finally {
		done = true;
		await inflight;
		await Promise.all(holders.map(async (h) => await beat(ctx, h, HANDOVER_S)));
	}
}
