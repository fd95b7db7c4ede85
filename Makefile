# toolsd — run `make help` for the targets.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

GO        ?= go
BUF       := $(GO) tool -modfile=tools.mod buf
LINT      := $(GO) tool -modfile=lint.mod golangci-lint
BIN       := bin
FUZZTIME  ?= 5s
PKGS      := ./...
NPM       ?= npm
NODE_EX   := examples/node

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

.PHONY: build
build: ## Build toolsd and the example programs into bin/
	$(GO) build -o $(BIN)/toolsd ./cmd/toolsd
	$(GO) build -o $(BIN)/example-provider ./examples/provider
	$(GO) build -o $(BIN)/example-hook ./examples/hook
	$(GO) build -o $(BIN)/example-agent ./examples/agent

.PHONY: run
run: ## Run toolsd with the example config and the bundled example provider (Ctrl-C stops both)
	$(GO) run ./cmd/toolsd -config examples/toolsd.yaml -example-provider -ephemeral -log-format console

.PHONY: test
test: vet buf-lint check-generate test-go fuzz-short readme-check ## Everything CI runs: vet, buf lint, stale-code check, race tests, short fuzz, README commands

.PHONY: test-go
test-go: node-deps ## Go tests with -race (goleak in every tested package that starts goroutines)
	$(GO) test -race -count=1 -timeout 8m $(PKGS)

.PHONY: node-deps
node-deps: ## npm ci in examples/node (a no-op without npm, or when node_modules is current)
	@if ! command -v $(NPM) >/dev/null 2>&1; then \
	  echo "npm not found: skipping $(NODE_EX) (its test skips too)"; \
	elif [ $(NODE_EX)/node_modules/.package-lock.json -nt $(NODE_EX)/package-lock.json ]; then \
	  echo "$(NODE_EX)/node_modules is up to date"; \
	else \
	  cd $(NODE_EX) && $(NPM) ci --ignore-scripts --no-audit --no-fund; \
	fi

.PHONY: vet
vet: ## go vet
	$(GO) vet $(PKGS)

.PHONY: generate
generate: ## Regenerate protobuf code offline (buf + local plugins)
	$(BUF) generate

.PHONY: check-generate
check-generate: ## Fail when committed generated code is stale
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cp -r gen "$$tmp/gen.before"; \
	$(BUF) generate; \
	if ! diff -r "$$tmp/gen.before" gen >/dev/null; then \
	  echo "generated code is stale: run 'make generate' and commit"; diff -r "$$tmp/gen.before" gen | head -20; exit 1; fi; \
	echo "generated code is up to date"

.PHONY: buf-lint
buf-lint: ## buf lint and buf format check
	$(BUF) lint
	$(BUF) format --diff --exit-code

.PHONY: lint
lint: vet buf-lint ## vet, golangci-lint, buf lint, buf format
	$(LINT) run ./...

.PHONY: fuzz-short
fuzz-short: ## Run every fuzz target briefly (FUZZTIME each, 5s by default)
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do \
	  for f in $$(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' $$dir/*_test.go 2>/dev/null | awk '{print $$2}'); do \
	    echo "fuzz $$pkg $$f"; \
	    if ! $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg >"$$out" 2>&1; then \
	      if [ "$$(grep -c -e '--- FAIL' "$$out")" = 1 ] && grep -A1 -e "^--- FAIL: $$f (" "$$out" | tail -1 | grep -qx '    context deadline exceeded' \
	         && ! grep -q 'Failing input written' "$$out"; then \
	        echo "  ended by Go's fuzz-deadline race (golang/go#75804, fixed in Go 1.27), not by an input: passed"; continue; \
	      fi; \
	      echo "  first attempt failed; retrying once (a crasher found is replayed from testdata and fails again):"; \
	      sed 's/^/    /' "$$out" | tail -15; \
	      if ! $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg >"$$out" 2>&1; then cat "$$out"; exit 1; fi; \
	    fi; \
	  done; done

.PHONY: fuzz
fuzz: ## Run every fuzz target for longer (FUZZTIME=2m by default here)
	$(MAKE) fuzz-short FUZZTIME=2m

.PHONY: readme-check
readme-check: $(BIN)/grpcurl ## Run the README's grpcurl commands against a real toolsd and compare outputs; check its flags, config keys, limit defaults, YAML examples and metrics against toolsd
	PATH="$(CURDIR)/$(BIN):$$PATH" $(GO) run ./scripts/readmecheck -readme README.md

.PHONY: grpcurl
grpcurl: $(BIN)/grpcurl ## Build grpcurl (pinned in tools.mod) into bin/

$(BIN)/grpcurl: tools.mod
	$(GO) build -modfile=tools.mod -o $(BIN)/grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl

.PHONY: bench
bench: ## Go micro-benchmarks and the load harness (writes bench/out/summary.json)
	mkdir -p bench/out && $(GO) test -run='^$$' -bench=. -benchmem -benchtime=300ms -count=1 ./internal/... ./pkg/... | tee bench/out/micro.txt
	$(GO) run ./bench/harness -out bench/out

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN) bench/out data
