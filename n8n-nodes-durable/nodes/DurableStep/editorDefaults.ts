/**
 * Node version 1.5: a workflow built in the editor, not imported, works with the defaults.
 *
 * - The gated operations (and Begin Step, Save Checkpoint) find their job by themselves
 *   (jobOfItem.ts): a node added from the node search is named "Durable Step", so a default
 *   expression `$('Start Job')...` failed with "Referenced node doesn't exist".
 * - Done Before items leave by the Done output (a webhook that answers with the last node's item
 *   answers a re-run 2xx), and the receipt is the whole answer unless Receipt Fields narrows it,
 *   so Done and Done Before items carry the same fields.
 * - Start Job has a Running Elsewhere output: a duplicate that met a live holder leaves green.
 *
 * n8n does not save a parameter equal to its default, so changed defaults need a new version:
 * nodes saved with 1.4 or earlier keep theirs.
 */
export const EDITOR_DEFAULTS_FROM = 1.5;

/** Shown only for node versions from (or before) 1.5, as n8n's displayOptions take it. */
export const from15 = { '@version': [{ _cnd: { gte: EDITOR_DEFAULTS_FROM } }] };
export const before15 = { '@version': [{ _cnd: { lt: EDITOR_DEFAULTS_FROM } }] };
