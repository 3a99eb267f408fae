"""The web console: one sign-in for editors, approvers and admins; server-rendered pages of jobs,
timelines, approvals and the review queue (templates/)."""
