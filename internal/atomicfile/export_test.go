package atomicfile

// TempName is tempName, for tests that make the files a killed writer
// leaves.
var TempName = tempName
