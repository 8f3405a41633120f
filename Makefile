.PHONY: test demo bench clean
# Convenience wrappers; the README's commands are ./scripts/test and ./scripts/demo.
test:
	./scripts/test
demo:
	./scripts/demo
# Benchmarks print ratios against peers measured in the same run (never timed tests).
bench:
	.venv/bin/python bench/bench_codec.py
	.venv/bin/python bench/bench_assignors.py
	.venv/bin/python bench/bench_embedded_join.py
	.venv/bin/python bench/bench_audit.py
	.venv/bin/python bench/bench_consumer.py
clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache .hypothesis
