.PHONY: test demo bench clean
# Convenience wrappers; the README's commands are ./scripts/test and ./scripts/demo.
test:
	./scripts/test
demo:
	./scripts/demo
bench:
	.venv/bin/python bench/run_all.py
clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache .hypothesis
