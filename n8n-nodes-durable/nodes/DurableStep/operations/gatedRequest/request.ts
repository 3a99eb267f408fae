import type { IDataObject, IExecuteFunctions, IHttpRequestMethods } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';
import { jsonObject, jsonParam, optionalString, parseJson, requiredString } from '../../params';

/** The request as it will be sent; its digest covers method, URL (query included) and body. */
export interface HttpCall {
	method: IHttpRequestMethods;
	url: string;
	headers: Record<string, string>;
	bodyType: 'json' | 'form' | 'none';
	body: unknown;
	timeout: number;
	authentication: string;
	idempotencyHeader: string;
	/** Whether the step's ticket (operation_key, job_id, fencing_token) is added to the body as sent. */
	ticketInBody: boolean;
}

const METHODS = ['DELETE', 'GET', 'PATCH', 'POST', 'PUT'];

function pairs(ctx: IExecuteFunctions, name: string, i: number): Array<[string, string]> {
	const collection = ctx.getNodeParameter(name, i, {}) as { parameters?: Array<{ name?: unknown; value?: unknown }> };
	return (collection.parameters ?? [])
		.map((p) => [String(p.name ?? '').trim(), p.value === undefined || p.value === null ? '' : String(p.value)] as [string, string])
		.filter(([k]) => k !== '');
}

function checkedUrl(ctx: IExecuteFunctions, i: number, label: string, raw: string): URL {
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		throw new NodeOperationError(ctx.getNode(), `"${label}" is not a valid URL: ${JSON.stringify(raw)}`, {
			itemIndex: i,
			description: `Enter an absolute http:// or https:// URL in "${label}".`,
		});
	}
	if (url.protocol !== 'http:' && url.protocol !== 'https:') {
		throw new NodeOperationError(ctx.getNode(), `"${label}" must be an http:// or https:// URL, got ${url.protocol}`, {
			itemIndex: i,
			description: `Enter an absolute http:// or https:// URL in "${label}".`,
		});
	}
	return url;
}

function bodyOf(ctx: IExecuteFunctions, i: number, bodyType: string): unknown {
	if (bodyType === 'none') return undefined;
	if (bodyType === 'form') return Object.fromEntries(pairs(ctx, 'formBody', i));
	return jsonParam(ctx, 'jsonBody', i, 'JSON Body', {});
}

/** Reads item i's request; a bad field is a NodeOperationError that names it (nothing is begun). */
export function readCall(ctx: IExecuteFunctions, i: number): HttpCall {
	const method = String(ctx.getNodeParameter('method', i, 'POST')).toUpperCase();
	if (!METHODS.includes(method)) {
		throw new NodeOperationError(ctx.getNode(), `"Method" must be one of ${METHODS.join(', ')}, got ${JSON.stringify(method)}`, {
			itemIndex: i,
		});
	}
	const url = checkedUrl(ctx, i, 'URL', requiredString(ctx, 'url', i, 'URL'));
	if (ctx.getNodeParameter('sendQuery', i, false) === true) {
		for (const [k, v] of pairs(ctx, 'queryParameters', i)) url.searchParams.append(k, v);
	}
	const headers: Record<string, string> = {};
	if (ctx.getNodeParameter('sendHeaders', i, false) === true) {
		for (const [k, v] of pairs(ctx, 'headerParameters', i)) headers[k] = v;
	}
	const bodyType = String(ctx.getNodeParameter('bodyType', i, 'json')) as HttpCall['bodyType'];
	const options = ctx.getNodeParameter('gateOptions', i, {}) as IDataObject;
	const timeout = Number(options.timeout ?? 30000);
	return {
		method: method as IHttpRequestMethods,
		url: url.toString(),
		headers,
		bodyType,
		body: bodyOf(ctx, i, bodyType),
		timeout: Number.isFinite(timeout) && timeout > 0 ? timeout : 30000,
		authentication: String(ctx.getNodeParameter('authentication', i, 'none')),
		idempotencyHeader: optionalString(options.idempotencyHeader ?? 'Idempotency-Key') ?? '',
		ticketInBody: options.ticketInBody === true,
	};
}

/**
 * What the ledger digests: the request as sent (method, URL with its query, body), never the
 * input item, so nothing volatile (a timestamp, the fencing token) can make a re-run differ.
 * Headers are left out: they carry credentials, and the operation key itself. So is the ticket
 * added with "Add Step Ticket to Body": the fencing token changes with every run.
 */
export function digestPayload(call: HttpCall): IDataObject {
	return { method: call.method, url: call.url, body: (call.body ?? null) as IDataObject };
}

/**
 * Gate Option "Digest Payload": the payload a remote that checks the ledger itself digests (the
 * publishing proxy: the body without the ticket, plus the post id of the path, a file by its
 * sha256). That remote refuses a request whose own digest differs, so the binding holds there.
 */
export function explicitPayload(ctx: IExecuteFunctions, i: number): IDataObject | undefined {
	const options = ctx.getNodeParameter('gateOptions', i, {}) as IDataObject;
	const raw = options.payload;
	if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return undefined;
	return jsonObject(parseJson(raw, ctx, i, 'Digest Payload', {}), ctx, i, 'Digest Payload');
}

