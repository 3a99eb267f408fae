"""Lookups that decide only on proof, against the answer shapes of real APIs: real n8n 2.40.7
(`n8n start`, production webhooks), the real ledger server and a local remote that counts writes."""
