# costgate — make test installs what the tests need, then runs them all.
GO ?= go

.PHONY: test deps bench vet

# bench/ is a module of its own, so ./... leaves it out: its tests run too.
test: deps
	$(GO) test -race -count=1 ./...
	cd bench && $(GO) test -race -count=1 ./...

# The programs the tests run (never a fake), each with the Debian package
# it comes in: redis-server; chromium for the playground's browser tests;
# nginx and caddy in front of a service, costgate as their auth_request and
# forward_auth; promtool for deploy's alert rules; git for the client
# repository of docs/trusted-documents.md's pre-commit hook; curl for the
# README's session, run as it is written. What is missing is installed with
# apt-get as root, else the install command is printed.
TEST_PROGRAMS = redis-server:redis-server chromium:chromium nginx:nginx caddy:caddy promtool:prometheus git:git curl:curl

deps:
	@missing=""; \
	for pp in $(TEST_PROGRAMS); do \
		prog=$${pp%%:*}; pkg=$${pp#*:}; \
		command -v $$prog >/dev/null 2>&1 || [ -x /usr/sbin/$$prog ] || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing$$missing (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing >/dev/null; \
		else \
			echo "the tests need$$missing: sudo apt-get install -y$$missing" >&2; exit 1; \
		fi; \
	fi

vet:
	$(GO) vet ./...

bench: deps
	$(GO) test -run='^$$' -bench=. -benchmem ./limiter/...
