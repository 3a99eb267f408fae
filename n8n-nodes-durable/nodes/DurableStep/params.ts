import type { IDataObject, IExecuteFunctions } from 'n8n-workflow';
import { NodeOperationError } from 'n8n-workflow';

/** Reads a parameter; expression failures become a NodeOperationError that says what to fix. */
function read(ctx: IExecuteFunctions, name: string, i: number, label: string, fallback?: unknown): unknown {
	try {
		return ctx.getNodeParameter(name, i, fallback);
	} catch (error) {
		throw new NodeOperationError(ctx.getNode(), `Could not read "${label}": ${(error as Error).message}`, {
			itemIndex: i,
			description: `Check the "${label}" field. Its default reads the output of the node named "Start Job" or "Begin Step"; if your nodes have other names, or did not run for this item, set the field explicitly.`,
		});
	}
}

export function requiredString(ctx: IExecuteFunctions, name: string, i: number, label: string): string {
	const value = read(ctx, name, i, label, '');
	const text = value === undefined || value === null ? '' : String(value).trim();
	if (!text) {
		throw new NodeOperationError(ctx.getNode(), `"${label}" is empty`, {
			itemIndex: i,
			description: `Set "${label}" (a value or an expression that resolves for this item).`,
		});
	}
	return text;
}

export function optionalString(value: unknown): string | undefined {
	const text = value === undefined || value === null ? '' : String(value).trim();
	return text ? text : undefined;
}

export function fencingToken(ctx: IExecuteFunctions, i: number): number {
	const raw = read(ctx, 'fencingToken', i, 'Fencing Token', '');
	const token = typeof raw === 'number' ? raw : Number(String(raw ?? '').trim());
	if (raw === '' || raw === null || raw === undefined || !Number.isInteger(token) || token < 0) {
		throw new NodeOperationError(ctx.getNode(), `"Fencing Token" must be a non-negative integer, got ${JSON.stringify(raw)}`, {
			itemIndex: i,
			description:
				'Use the fencing_token output of Start Job (the default expression does this when the node is named "Start Job").',
		});
	}
	return token;
}

/** A JSON parameter: an object from an expression, or a JSON string typed into the field. */
export function jsonParam(ctx: IExecuteFunctions, name: string, i: number, label: string, fallback: unknown): unknown {
	return parseJson(read(ctx, name, i, label, fallback), ctx, i, label, fallback);
}

/** Parses a JSON string typed into a field; objects from expressions pass through. */
export function parseJson(value: unknown, ctx: IExecuteFunctions, i: number, label: string, fallback: unknown): unknown {
	if (typeof value !== 'string') return value;
	if (value.trim() === '') return fallback;
	try {
		return JSON.parse(value);
	} catch (error) {
		throw new NodeOperationError(ctx.getNode(), `"${label}" is not valid JSON: ${(error as Error).message}`, {
			itemIndex: i,
			description: `Enter a JSON value in "${label}", or an expression such as {{ $json }}.`,
		});
	}
}

export function jsonObject(value: unknown, ctx: IExecuteFunctions, i: number, label: string): IDataObject {
	if (value === undefined || value === null) return {};
	if (typeof value !== 'object' || Array.isArray(value)) {
		throw new NodeOperationError(ctx.getNode(), `"${label}" must be a JSON object`, {
			itemIndex: i,
			description: `Enter an object such as {"key": "value"} in "${label}".`,
		});
	}
	return value as IDataObject;
}

/** A receipt as the ledger stores it: an object; any other value is wrapped as `{value}`. */
export function asReceipt(value: unknown): IDataObject {
	if (value && typeof value === 'object' && !Array.isArray(value)) return value as IDataObject;
	if (value === undefined || value === null || value === '') return {};
	return { value: value as IDataObject[keyof IDataObject] };
}
