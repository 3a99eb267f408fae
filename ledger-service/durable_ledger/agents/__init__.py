"""OpenAI Agents API session control (issue: session state rebuild, receipts, follow-ups, webhooks)."""
