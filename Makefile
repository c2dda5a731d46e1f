# costgate — make test installs what the tests need, then runs them all.
GO ?= go

.PHONY: test deps bench vet

test: deps
	$(GO) test -race -count=1 ./...

# The tests start real redis-server, nginx and caddy processes (never a fake); they
# come from Debian's packages.
deps:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing redis-server (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
		else \
			echo "the tests need redis-server: sudo apt-get install -y redis-server" >&2; exit 1; \
		fi; \
	fi
	@# playground's browser test drives Debian's headless chromium.
	@if ! [ -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "the tests need chromium: sudo apt-get install -y chromium" >&2; exit 1; \
		fi; \
	fi

	@# the gateway tests run Debian's nginx in front of a service, with costgate as its auth_request.
	@if ! [ -x /usr/sbin/nginx ] && ! command -v nginx >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing nginx (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
		else \
			echo "the tests need nginx: sudo apt-get install -y nginx" >&2; exit 1; \
		fi; \
	fi
	@# ... and Debian's caddy in front of a service, costgate as its forward_auth.
	@if ! [ -x /usr/bin/caddy ] && ! command -v caddy >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing caddy (apt-get)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq caddy >/dev/null; \
		else \
			echo "the tests need caddy: sudo apt-get install -y caddy" >&2; exit 1; \
		fi; \
	fi

	@# deploy's tests check the alert rules with promtool, from Debian's prometheus package.
	@if ! command -v promtool >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing promtool (apt-get install prometheus)"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
		else \
			echo "the tests need promtool: sudo apt-get install -y prometheus" >&2; exit 1; \
		fi; \
	fi

vet:
	$(GO) vet ./...

bench: deps
	$(GO) test -run='^$$' -bench=. -benchmem ./limiter/...
