package pprofexport

import (
	"strings"

	"github.com/tensorlife/tensorlife/internal/format"
	"github.com/tensorlife/tensorlife/track"
)

// The labels of a live sample: the tensors' own attributes, which every
// live sample carries, next to the request labels LabelKeys lets through.
const (
	// LabelDType is the string label holding the tensors' element type.
	LabelDType = "dtype"
	// LabelDevice is the string label holding the device name.
	LabelDevice = "device"
	// LabelKind is the string label holding what the tensors are for
	// ("tensor", "mask", "kv-cache").
	LabelKind = "kind"
	// LabelShape is the string label holding the shape, as [2 3 4].
	LabelShape = "shape"
	// OtherShapes is LabelShape's value on the sample of a site's tensors
	// past the shapes it counts apart (track.Group.OtherShapes): the
	// default profile shows at most 64 shapes per site, and this sample.
	OtherShapes = "other shapes"
	// LabelBytes is the numeric label holding the size of each tensor of a
	// sample, in bytes, as "bytes" does in a Go heap profile
	// (-tagfocus=bytes=1mb: selects tensors of a megabyte or more).
	LabelBytes = "bytes"
	// LabelLeaked is the string label "true" on the samples of tensors the
	// garbage collector found without Free (-tagfocus leaked=true); absent
	// on the others.
	LabelLeaked = "leaked"
	// LabelHeldBy is the string label naming the extra owner still holding
	// a sample's memory after the tensors' own handles were freed: "a View
	// made at decode.go:88 (main.decode)" (-tagfocus held_by=View).
	LabelHeldBy = "held_by"
	// LabelPrefix keeps request labels apart from the names above: a
	// request label whose key is one of them, or starts with LabelPrefix
	// itself, is written as LabelPrefix plus its key. "bytes" becomes
	// "label_bytes" and "label_bytes" becomes "label_label_bytes", so no two
	// keys ever meet under one name; every other key is written as it is.
	LabelPrefix = "label_"
)

func reservedLabel(key string) bool {
	switch key {
	case LabelDType, LabelDevice, LabelKind, LabelShape, LabelBytes, LabelLeaked, LabelHeldBy:
		return true
	}
	return false
}

// labelName is the name a request label key is written under (see
// LabelPrefix). The renaming is one to one: a renamed key starts with
// LabelPrefix, and a key written as it is does not.
func labelName(key string) string {
	if reservedLabel(key) || strings.HasPrefix(key, LabelPrefix) {
		return LabelPrefix + key
	}
	return key
}

// leakedTrue is LabelLeaked's value.
const leakedTrue = "true"

// sampleLabels are the label maps of a sample.
type sampleLabels struct {
	label map[string][]string
	num   map[string][]int64
	unit  map[string][]string
}

// labelKey identifies the labels of a sample without rendering them:
// shapes of up to eight dimensions are compared inline.
type labelKey struct {
	dtype, device, kind string
	rank                int
	dims                [8]int
	longShape           string
	otherShapes         bool
	labels              string // the request labels kept, encoded
	perTensor           int64
	leaked              bool
	heldSite            *track.Site // Group.HeldBy, which the sample's labels name
	heldHow             string
}

// keptLabels are the request labels of a label set that a profile keeps.
type keptLabels struct {
	key   string   // the pairs, as a map key
	pairs []string // name (renamed), value, interleaved
}

// labeler builds label maps once per distinct set of labels in a profile,
// so that groups that differ only by site share them: a profile of a
// thousand sites of one kind of tensor holds one set of maps.
type labeler struct {
	cfg   *config
	kept  map[track.Labels]keptLabels
	cache map[labelKey]*sampleLabels
}

func newLabeler(cfg *config) *labeler {
	return &labeler{cfg: cfg, kept: make(map[track.Labels]keptLabels), cache: make(map[labelKey]*sampleLabels)}
}

// keep returns the request labels of l the profile carries, renamed.
func (lb *labeler) keep(l track.Labels) keptLabels {
	if k, ok := lb.kept[l]; ok {
		return k
	}
	var k keptLabels
	var key strings.Builder
	l.Range(func(name, value string) bool {
		if lb.cfg.keepsLabel(name) {
			name = labelName(name)
			k.pairs = append(k.pairs, name, value)
			key.WriteString(name)
			key.WriteByte(0)
			key.WriteString(value)
			key.WriteByte(0)
		}
		return true
	})
	k.key = key.String()
	lb.kept[l] = k
	return k
}

// labels returns the labels of the tensors of g that leaked (or of those
// that did not): their attributes, the request labels the profile keeps,
// the size of each tensor and whether they leaked. Empty values are left
// out: the profile format cannot tell an empty string label from a missing
// one, and a value that does not survive a round trip would make two
// readings of one file differ.
func (lb *labeler) labels(g *track.Group, leaked bool) *sampleLabels {
	kept := lb.keep(g.Labels)
	k := labelKey{dtype: g.DType, device: g.Device, kind: g.Kind, rank: len(g.Shape), labels: kept.key, leaked: leaked}
	if g.HeldBy != nil {
		k.heldSite, k.heldHow = g.HeldBy.Site, g.HeldBy.How
	}
	if g.Count > 0 && !g.OtherShapes {
		k.perTensor = g.Bytes / g.Count // the other shapes' tensors differ in size
	}
	k.otherShapes = g.OtherShapes
	if len(g.Shape) <= len(k.dims) {
		copy(k.dims[:], g.Shape)
	} else {
		k.longShape = format.Shape(g.Shape)
	}
	if l, ok := lb.cache[k]; ok {
		return l
	}

	l := &sampleLabels{label: make(map[string][]string, 5+len(kept.pairs)/2)}
	held := ""
	if g.HeldBy != nil {
		held = g.HeldBy.String()
	}
	eachLabel(g, leaked, shapeLabel(g), held, kept.pairs, func(key, value string) {
		l.label[key] = append(l.label[key], value)
	})
	// A zero numeric label is lost in the encoding, as an empty string is.
	if k.perTensor != 0 {
		l.num = map[string][]int64{LabelBytes: {k.perTensor}}
		l.unit = map[string][]string{LabelBytes: {"bytes"}}
	}
	lb.cache[k] = l
	return l
}

// eachLabel calls set with each string label of a sample of g, as every
// profile writes them: the tensors' attributes (shape and held, the extra
// owner, already rendered), whether they leaked, then the request labels
// kept (names renamed, values interleaved). Empty values are left out: the
// profile format cannot tell an empty string label from a missing one.
// shapeLabel is the shape label's value of g: OtherShapes for the
// tensors of a site past the shapes it counts apart.
func shapeLabel(g *track.Group) string {
	if g.OtherShapes {
		return OtherShapes
	}
	return format.Shape(g.Shape)
}

func eachLabel(g *track.Group, leaked bool, shape, held string, kept []string, set func(key, value string)) {
	put := func(key, value string) {
		if value != "" {
			set(key, value)
		}
	}
	put(LabelDType, g.DType)
	put(LabelDevice, g.Device)
	put(LabelKind, g.Kind)
	put(LabelShape, shape)
	if leaked {
		put(LabelLeaked, leakedTrue)
	}
	put(LabelHeldBy, held)
	for i := 0; i+1 < len(kept); i += 2 {
		put(kept[i], kept[i+1])
	}
}
