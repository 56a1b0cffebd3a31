// Package integration holds tensorlife's cross-package tests: programs that
// wire a tracker, pools, devices, the summary and the OpenTelemetry bridge
// together and check that every report tells the same story. It has no
// code of its own; each package's own tests stay with the package.
package integration
