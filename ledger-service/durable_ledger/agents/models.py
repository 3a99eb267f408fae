"""Tables of the agents module; create_schema() creates everything listed in AGENT_MODELS."""

AGENT_MODELS = []
