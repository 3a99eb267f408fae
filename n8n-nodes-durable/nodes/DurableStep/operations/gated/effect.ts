import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import type { SideEffectFailure } from '../recordOutcome/classify';
import type { Prepared } from '../beginStep/prepare';

/** What the side effect is told about its step: the operation key to stamp, the token it runs under. */
export interface StepTicket {
	job_id: string;
	action: string;
	operation_key: string;
	fencing_token: number;
	attempt: number | null;
}

/**
 * An outcome the side effect declared itself (a sub-workflow that returned `outcome: "failed"`),
 * recorded as is: fail (retryable or not) or unknown. Nothing for the ledger to classify.
 */
export interface DeclaredOutcome {
	verb: 'fail' | 'unknown';
	retryable: boolean;
	message: string;
}

/**
 * What one try of the side effect did: a result to confirm (its remote id and the receipt to
 * keep), the facts of a failure for the ledger to classify (definite failure or unknown), or an
 * outcome the side effect declared. `json` is the item that leaves the node.
 */
export type Performed =
	| { ok: true; remoteId: string; receipt: IDataObject; json: IDataObject }
	| { ok: false; failure: SideEffectFailure }
	| { ok: false; declared: DeclaredOutcome; json?: IDataObject };

/** A lookup's verdict, as Report Lookup sends it: found (with the object), absent, undecidable. */
export interface LookUpVerdict {
	result: 'found' | 'absent' | 'undecidable';
	remoteId?: string;
	receipt?: IDataObject;
	evidence: IDataObject;
}

/**
 * A side effect run from inside the node (Gated HTTP Request, Gated Sub-workflow). `perform` is
 * called only after the ledger answered dispatch for this attempt; `lookUp`, when the builder set
 * one up, only for an attempt whose outcome the ledger does not know.
 */
export interface SideEffect {
	/**
	 * How long one try can take to land at the remote (the request's timeout). While an attempt
	 * sent less than this ago is still SENT, a lookup that finds nothing proves nothing: the
	 * request may be on its way (a second execution of the same order, started meanwhile).
	 */
	inFlightMs?: number;
	/**
	 * Whether `lookUp` sends the request again (a remote that dedupes by the idempotency header).
	 * Not while an attempt may still be in flight: a remote that records the key only once it has
	 * answered would take the resend for a new request.
	 */
	lookUpResends?: boolean;
	perform(ctx: IExecuteFunctions, i: number, ticket: StepTicket): Promise<Performed>;
	lookUp?: (ctx: IExecuteFunctions, i: number, ticket: StepTicket) => Promise<LookUpVerdict>;
}

/** Begin Step's prepared begin plus the side effect the node runs itself. */
export interface GatedPrepared extends Prepared {
	effect: SideEffect;
	/**
	 * Called once the side effect has answered, before its outcome is recorded (one item under
	 * liveness, operation.ts): the holder whose handover heartbeat the outcome's request carries
	 * (recordAndRoute), if any.
	 */
	handover?: (verb: string) => Promise<string | undefined>;
}
