// What a lookup's answer proves. Found only when an object in it carries the step's key, absent
// only when the answer shows there is none; every other answer is undecidable, never a default.
import type { IDataObject } from 'n8n-workflow';
import { atPath, idAt } from '../gated/receipt';

/** How the builder told the node to read the lookup's answer. */
export interface LookUpRule {
	/** Dot path, in each object, of the field that must equal `matchValue`. */
	matchField: string;
	/** The value that proves the object is this step's (the operation key, or a business field). */
	matchValue: string;
	/** Dot path to the object's ID (the step's remote ID). */
	idPath: string;
	/** Where the list is in a wrapped answer; empty: a bare list, one object, or data / results / items. */
	listPath: string;
	/** The builder declares that the lookup URL addresses or selects by the key, so a 404 or an empty list proves absence. */
	emptyIsAbsent: boolean;
}

/** One HTTP answer of the lookup, as read. */
export interface LookUpAnswer {
	status: number;
	contentType: string;
	body: unknown;
}

export type Proof =
	| { result: 'found'; object: IDataObject; remoteId: string; evidence: IDataObject }
	| { result: 'absent'; evidence: IDataObject }
	| { result: 'undecidable'; evidence: IDataObject };

const WRAPPERS = ['data', 'results', 'items'];
const EXCERPT = 200;

const isObject = (v: unknown): v is IDataObject => v !== null && typeof v === 'object' && !Array.isArray(v);

function excerpt(body: unknown): string {
	const text = typeof body === 'string' ? body : JSON.stringify(body ?? null);
	return text.length > EXCERPT ? `${text.slice(0, EXCERPT)}...` : text;
}

/** A page meant for a browser (an error page of a proxy, a login page), not the API's answer. */
function isHtml(answer: LookUpAnswer): boolean {
	if (/html/i.test(answer.contentType)) return true;
	return typeof answer.body === 'string' && /^\s*</.test(answer.body);
}

/** An answer that says it failed although its status is 2xx (`{"error": ...}`, `{"ok": false}`). */
function errorIn(body: IDataObject): string | undefined {
	const error = body.error ?? body.errors;
	const filled = Array.isArray(error) ? error.length > 0 : isObject(error) ? Object.keys(error).length > 0 : Boolean(error);
	if (filled) return `the answer carries an error: ${excerpt(error)}`;
	if (body.ok === false || body.success === false) return 'the answer says it failed (ok/success false)';
	if (typeof body.status === 'string' && /^(error|fail(ed|ure)?)$/i.test(body.status)) return `the answer's status is "${body.status}"`;
	return undefined;
}

/** More pages to come: an empty page then proves nothing about the others. */
function morePages(body: unknown): boolean {
	if (!isObject(body)) return false;
	return body.has_more === true || Boolean(body.next) || Boolean(body.next_page) || Boolean(body.next_cursor);
}

/** The objects the answer lists, or why it lists none the rule can read. */
function candidatesOf(body: unknown, rule: LookUpRule): IDataObject[] | string {
	if (rule.listPath) {
		const list = atPath(body, rule.listPath);
		return Array.isArray(list) ? (list as IDataObject[]) : `"${rule.listPath}" (Look Up List Path) is not a list in the answer`;
	}
	if (Array.isArray(body)) return body as IDataObject[];
	if (!isObject(body)) return 'the answer is neither an object nor a list';
	if (atPath(body, rule.matchField) !== undefined) return [body];
	const wrapper = WRAPPERS.find((name) => Array.isArray(body[name]));
	if (wrapper) return body[wrapper] as IDataObject[];
	return `the answer has no "${rule.matchField}" and no list (keys: ${Object.keys(body).slice(0, 10).join(', ') || 'none'})`;
}

const scalar = (v: unknown) => (typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) ? String(v) : undefined);

/**
 * The verdict of one lookup answer. Only 2xx and 404 answers reach here: any other status (and a
 * transport failure) proves nothing either way and the caller leaves the step unknown.
 *
 *   2xx, an object whose Match Field = value     -> found (one object, a list, a wrapped list)
 *   404 (not a web page), declared               -> absent: the object addressed is not there
 *   2xx, an empty list, declared                 -> absent (unless more pages follow)
 *   anything else                                 -> undecidable, with what was seen
 */
export function proofOf(answer: LookUpAnswer, rule: LookUpRule): Proof {
	const evidence: IDataObject = { http_status: answer.status, match_field: rule.matchField, match_value: rule.matchValue };
	const undecidable = (reason: string, extra: IDataObject = {}): Proof => ({
		result: 'undecidable',
		evidence: { ...evidence, ...extra, reason },
	});
	if (isHtml(answer)) return undecidable('the lookup answered a web page, not the API', { answer_excerpt: excerpt(answer.body) });
	if (answer.status === 404) {
		// A JSON 404 is also what an API answers for a route that does not exist (a typo in the URL).
		if (rule.emptyIsAbsent) return { result: 'absent', evidence: { ...evidence, detail: 'the lookup answered 404' } };
		return undecidable('a 404, but the Look Up URL is not declared to address the object by the key (404 or Empty Proves Absence)', {
			answer_excerpt: excerpt(answer.body),
		});
	}
	if (typeof answer.body === 'string') return undecidable('the answer is not JSON', { answer_excerpt: excerpt(answer.body) });
	const failed = isObject(answer.body) ? errorIn(answer.body) : undefined;
	const candidates = candidatesOf(answer.body, rule);
	if (typeof candidates === 'string') return undecidable(failed ?? candidates, { answer_excerpt: excerpt(answer.body) });
	const seen = candidates.map((c) => scalar(atPath(c, rule.matchField)) ?? null);
	const at = seen.indexOf(rule.matchValue);
	if (at >= 0) {
		const object = candidates[at];
		const remoteId = idAt(object, rule.idPath);
		const matches = seen.filter((v) => v === rule.matchValue).length;
		if (remoteId === undefined) {
			return undecidable(`the object with ${rule.matchField} = ${rule.matchValue} has no ID at "${rule.idPath}" (Look Up ID Path)`, {
				answer_excerpt: excerpt(object),
			});
		}
		return { result: 'found', object, remoteId, evidence: { ...evidence, objects: candidates.length, matches, remote_id: remoteId } };
	}
	// Checked after a match: an object of this step that has a status of its own ("failed") is still
	// this step's object; an error envelope without it proves nothing.
	if (failed) return undecidable(failed, { answer_excerpt: excerpt(answer.body) });
	if (candidates.length === 0 && rule.emptyIsAbsent && !morePages(answer.body)) {
		return { result: 'absent', evidence: { ...evidence, objects: 0, detail: 'an empty answer to a lookup that filters by the key' } };
	}
	if (candidates.length === 0) {
		return undecidable(
			morePages(answer.body)
				? 'an empty page, and the answer says more pages follow'
				: 'an empty answer, but the Look Up URL is not declared to filter by the key (404 or Empty Proves Absence)',
			{ objects: 0 },
		);
	}
	return undecidable(`${candidates.length} object(s), none with ${rule.matchField} = ${rule.matchValue} (an API may ignore an unknown filter)`, {
		objects: candidates.length,
		values_seen: seen.slice(0, 5),
	});
}
