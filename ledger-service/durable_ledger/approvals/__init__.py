"""Approvals: rules binding an approval to job + version + content digest + target + expiry
(rules.py), an approver's decisions (decisions.py), executions waiting for one and their resumes
(waits.py), what an approval covers read back from WordPress (preview.py), and the HTTP routes."""
