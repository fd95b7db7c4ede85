//go:build !race

package pipeline_test

const raceBuild = false
