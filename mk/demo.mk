# The article pipeline: OpenAI stand-in, docker-compose validation, demo (issue: article pipeline).

.PHONY: test-demo openai-standin

test-demo: setup
	$(PY) -m pytest -q tests/demo

openai-standin:
	$(PY) stack/openai_standin.py --port $${OPENAI_STANDIN_PORT:-8789}
