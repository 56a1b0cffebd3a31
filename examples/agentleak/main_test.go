package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorlife/tensorlife/tensor"
	"github.com/tensorlife/tensorlife/timeline"
	"github.com/tensorlife/tensorlife/track/tracktest"
)

// maskLine is the leaking line, as frames name it. Under go test the
// package is not main, so frames end with this suffix.
const maskFunc = ".(*agent).decodeLeaky"

func newTestSession(t *testing.T, args ...string) *session {
	t.Helper()
	o, err := parseFlags(append([]string{"-profile", "", "-oom-dir", ""}, args...), &bytes.Buffer{})
	require.NoError(t, err)
	s, err := newSession(o)
	require.NoError(t, err)
	return s
}

// fakeT stands in for a *testing.T to catch what tracktest reports.
type fakeT struct {
	mu     sync.Mutex
	errors []string
}

func (f *fakeT) Error(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprint(args...))
}

func TestLeakyVariantFailsVerifyNoneNamingTheMaskLine(t *testing.T) {
	s := newTestSession(t, "-requests", "4")
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, 4))
	require.NoError(t, res.err)

	ft := &fakeT{}
	tracktest.VerifyNone(ft, s.tr, tracktest.MaxRetries(0))
	require.Len(t, ft.errors, 1, "the leak fails the test")
	report := ft.errors[0]
	assert.Contains(t, report, maskFunc)
	assert.Contains(t, report, "agent.go:")
	assert.Contains(t, report, "request=r0")
	require.NoError(t, s.close())
}

func TestFixedVariantLeaksNothing(t *testing.T) {
	s := newTestSession(t, "-fixed", "-requests", "32")
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, 32))
	require.NoError(t, res.err)
	assert.Empty(t, s.watcher.Suspects())
	assert.Zero(t, s.rebuilds())
	st := s.lanes[0].prompts.Stats()
	assert.LessOrEqual(t, st.Bytes, st.MaxBytes, "the prompt cache stays within its budget")
	assert.Positive(t, st.Hits, "repeated prompts hit the cache")
	require.NoError(t, s.close())
	tracktest.VerifyNone(t, s.tr)
}

func TestWatcherNamesTheMaskSiteWithin64Requests(t *testing.T) {
	s := newTestSession(t, "-requests", "64")
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, 64))
	require.NoError(t, res.err)
	require.NotNil(t, s.firstSuspect, "the watcher names a suspect")
	assert.True(t, strings.HasSuffix(s.firstSuspect.Site.Location().Function, maskFunc), s.firstSuspect.Site.String())
	assert.LessOrEqual(t, s.suspectAt, 64)
	t.Logf("the watcher named the mask site after %d requests", s.suspectAt)
	require.NotNil(t, s.firstRebuild, "the mask builder reports the rebuild")
	assert.True(t, strings.HasSuffix(s.firstRebuild.Location.Function, maskFunc))
	require.NoError(t, s.close())
}

func TestFixedVariantHasNoSuspectsOver10000Requests(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 requests")
	}
	n := 10000
	if raceEnabled {
		n = 1000 // the race detector makes each request ten times slower
	}
	s := newTestSession(t, "-fixed", "-requests", fmt.Sprint(n), "-tokens", "4", "-batch", "1")
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, n))
	require.NoError(t, res.err)
	assert.Equal(t, n, res.served)
	assert.Empty(t, s.watcher.Suspects())
	assert.Nil(t, s.firstSuspect)
	require.NoError(t, s.close())
	tracktest.VerifyNone(t, s.tr)
}

func TestLeakEndsInAnOOMNamingTheMaskLine(t *testing.T) {
	s := newTestSession(t, "-requests", "2000", "-budget", "2097152")
	res := s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, 2000))
	require.Error(t, res.err)
	var oom *tensor.OOMError
	require.ErrorAs(t, res.err, &oom)
	require.NotEmpty(t, oom.TopSites)
	assert.True(t, strings.HasSuffix(oom.TopSites[0].Site.Location().Function, maskFunc), oom.TopSites[0].Site.String())
	assert.Contains(t, res.err.Error(), "agent.go:")
	require.NoError(t, s.close())
}

func TestOutputAndFiles(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "tensors.pb.gz")
	svg := filepath.Join(dir, "leaky.svg")
	trace := filepath.Join(dir, "leaky.json")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-requests", "32", "-profile", prof, "-timeline", svg, "-trace", trace}, &out, false))
	text := out.String()

	// In order: the rebuilt mask, the watcher's suspect, the summary, the profile.
	order := []string{"mask rebuilt", "leak suspect after", "tensorlife memory summary", "go tool pprof -top " + prof}
	last := -1
	for _, s := range order {
		i := strings.Index(text, s)
		require.GreaterOrEqual(t, i, 0, "output lacks %q", s)
		assert.Greater(t, i, last, "%q is out of order", s)
		last = i
	}
	// Every line fits 100 columns but the paths it was given, which are as
	// long as $TMPDIR makes them: measured with the directory as "DIR".
	for _, line := range strings.Split(strings.ReplaceAll(text, dir, "DIR"), "\n") {
		assert.LessOrEqual(t, len([]rune(line)), 100, "line wider than 100 columns: %q", line)
	}

	// The profile names the mask line first by inuse_space.
	f, err := os.Open(prof)
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(topFunction(t, p, "inuse_space"), maskFunc))
	for _, path := range []string{svg, trace} {
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}
}

// topFunction returns the leaf function holding the most of sample type st.
// sampleIndex returns the index of the sample type st in p's values, and
// fails t when p has no such type.
func sampleIndex(t *testing.T, p *profile.Profile, st string) int {
	t.Helper()
	idx := -1
	for i, s := range p.SampleType {
		if s.Type == st {
			idx = i
		}
	}
	require.GreaterOrEqual(t, idx, 0)
	return idx
}

func topFunction(t *testing.T, p *profile.Profile, st string) string {
	idx := sampleIndex(t, p, st)
	byFunc := map[string]int64{}
	for _, s := range p.Sample {
		if len(s.Location) > 0 && len(s.Location[0].Line) > 0 {
			byFunc[s.Location[0].Line[0].Function.Name] += s.Value[idx]
		}
	}
	best, top := int64(-1), ""
	for f, v := range byFunc {
		if v > best {
			best, top = v, f
		}
	}
	return top
}

func TestTimelineShowsTheMaskBandGrowingOnlyWhenLeaky(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		growing bool
	}{{[]string{"-requests", "24", "-trace", "x"}, true}, {[]string{"-fixed", "-requests", "24", "-trace", "x"}, false}} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			s := newTestSession(t, tc.args...)
			require.NoError(t, s.serve(context.Background(), newProgress(&bytes.Buffer{}, false, 24)).err)
			tl, err := timeline.Build(s.tr)
			require.NoError(t, err)
			var maskSeries *timeline.Series
			for i := range tl.Series {
				if strings.HasSuffix(tl.Series[i].Function, ".(*agent).decodeLeaky") || strings.Contains(tl.Series[i].Function, "(*Growable)") ||
					strings.HasSuffix(tl.Series[i].Function, ".(*agent).decodeFixed") {
					maskSeries = &tl.Series[i]
					break
				}
			}
			require.NotNil(t, maskSeries, "a mask series is drawn")
			v := maskSeries.Values
			end := v[len(v)-1]
			if tc.growing {
				// Samples are by time, and a loaded machine stretches any part of
				// the run: the band's shape is judged by where it ends, not by
				// its middle.
				assert.Greater(t, end, v[0], "the leaky mask band widens")
				assert.Equal(t, maskSeries.Peak, end, "and is widest at the end: masks are never freed")
			} else {
				assert.LessOrEqual(t, maskSeries.Peak, int64(8<<10), "the fixed mask band stays small: one mask per request")
			}
			require.NoError(t, s.close())
		})
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-requests", "0"}, {"-nope"}, {"-budget", "10", "-capacity", "5"}, {"extra"}} {
		err := run(context.Background(), args, &bytes.Buffer{}, false)
		assert.Error(t, err, "%v", args)
		assert.Equal(t, 2, exitCode(err), "%v", args)
	}
	assert.Equal(t, 2, exitCode(run(context.Background(), []string{"-h"}, &bytes.Buffer{}, false)))
}

// A run that the leak stops with out-of-memory exits 1 and says so; one that
// serves every request exits 0.
func TestExitStatus(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "2000", "-budget", "2097152", "-profile", "",
		"-oom-dir", t.TempDir()}, &out, false)
	require.Error(t, err)
	assert.ErrorIs(t, err, tensor.ErrOutOfMemory)
	assert.Equal(t, 1, exitCode(err))
	assert.Regexp(t, `^the run stopped after \d+ of 2000 requests: out of memory`, err.Error())
	assert.Contains(t, out.String(), "the run stopped:")

	err = run(context.Background(), []string{"-requests", "8", "-profile", ""}, &bytes.Buffer{}, false)
	assert.NoError(t, err)
	assert.Equal(t, 0, exitCode(err))
}

// The README's run, -requests 2000, ends in an out-of-memory error that
// leaves the dump behind: the profile, whose first line by inuse_space is
// the leaking one, the summary headed by the error, and the timeline's
// trace and picture. The output lists the files.
func TestTheOOMLeavesADumpBehind(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oom")
	var out bytes.Buffer
	err := run(context.Background(), []string{"-requests", "2000", "-profile", "", "-oom-dir", dir}, &out, false)
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	byExt := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		assert.True(t, strings.HasPrefix(name, "agentleak-oom-"), name)
		assert.Contains(t, out.String(), filepath.Join(dir, name), "the output lists the file")
		byExt[name[strings.LastIndex(name, "-1.")+3:]] = filepath.Join(dir, name)
	}
	require.Len(t, entries, 4, "%v", byExt)
	assert.Contains(t, out.String(), "out-of-memory dump, written when the first allocation failed:")

	f, err := os.Open(byExt["pb.gz"])
	require.NoError(t, err)
	defer f.Close()
	p, err := profile.Parse(f)
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(topFunction(t, p, "inuse_space"), maskFunc))
	summary, err := os.ReadFile(byExt["summary.txt"])
	require.NoError(t, err)
	assert.Contains(t, string(summary), "out of memory on host")
	assert.Contains(t, string(summary), "tensorlife memory summary")
	for _, ext := range []string{"trace.json", "svg"} {
		st, err := os.Stat(byExt[ext])
		require.NoError(t, err, ext)
		assert.Positive(t, st.Size(), ext)
	}
}
