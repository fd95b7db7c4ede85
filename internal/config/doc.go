// Package config loads toolsd's YAML configuration file over embedded defaults and
// validates it, reporting the file, line and column of every bad value. It owns no
// runtime state: it produces a plain [Config] that cmd/toolsd wires into the packages.
// The policy section is kept as a raw YAML node and handed to the policy package, which
// owns its own validation.
package config
