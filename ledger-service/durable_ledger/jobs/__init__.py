"""Jobs: a job, its lease and fencing tokens, Start Job, cancel, checkpoints, budgets, resume,
the job report and timeline, and their HTTP routes."""
