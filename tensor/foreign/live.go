package foreign

import "github.com/tensorlife/tensorlife/internal/hotpath"

// LiveAdoptions is a device's record of the foreign memory adopted on it
// (Adopt) and not yet released, in every tracker: Adopt checks new memory
// against it, so that memory is not adopted twice and a device's adoptions
// never add up to more than the device has. A tensor.Device implementation
// embeds it, as the CUDA device does (tensor.HostDevice keeps one too), to
// have those checks; it adds no exported field or method to the device.
// The zero value is ready; it must not be copied after first use.
type LiveAdoptions = hotpath.LiveAdoptions
