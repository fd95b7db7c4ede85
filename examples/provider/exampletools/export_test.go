package exampletools

// Sleep is the sleep tool's handler, for tests that must know when it runs.
var Sleep = sleep
