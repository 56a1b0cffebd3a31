package fpstack

// RequireWalks is requireWalks for the package's external tests.
var RequireWalks = requireWalks
