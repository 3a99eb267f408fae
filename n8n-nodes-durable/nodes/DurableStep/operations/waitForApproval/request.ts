import type { IDataObject } from 'n8n-workflow';

/** Link Expires After: the ledger accepts 60 s to 30 days (72 h when not sent). */
export const LINK_EXPIRY_MAX_HOURS = 720;

/**
 * The fields a builder maps into a sending node (Send Email, Slack, Telegram, Microsoft Teams,
 * Discord...) between Wait for Approval and the Wait node, from the ledger's `request`:
 * `{{ $json.approval.link }}`, `.subject`, `.text`, `.html`, `.slack_blocks`, `.summary`. The link
 * opens the decision page with its preview (signing in first); it grants nothing by itself, so a
 * message forwarded or prefetched by a mail scanner approves nothing.
 */
export function approvalFields(request: IDataObject): IDataObject {
	const summary = (request.summary ?? {}) as IDataObject;
	const what = String(summary.title || summary.action || summary.operation_key || 'a step');
	const job = summary.job_id ? ` (job ${String(summary.job_id)})` : '';
	return {
		link: request.link ?? null,
		approve_link: request.approve_link ?? null,
		deny_link: request.deny_link ?? null,
		expires_at: request.expires_at ?? null,
		subject: `Approval needed: ${what}${job}`,
		text: request.text ?? null,
		html: request.html ?? null,
		slack_blocks: request.slack_blocks ?? null,
		summary,
	};
}
