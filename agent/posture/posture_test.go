package posture_test

import (
	"testing"
	"testing/fstest"

	"github.com/boxwire/boxwire/agent/posture"
	"github.com/boxwire/boxwire/bridge/wire"
)

const hardenedStatus = "Name:\tboxwire-agent\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n"

const roMounts = "600 500 0:50 / / ro,relatime master:1 - overlay overlay rw,lowerdir=x\n601 600 0:51 / /tmp rw,nosuid - tmpfs tmpfs rw\n"

func TestFromFS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files fstest.MapFS
		check func(t *testing.T, p wire.Posture)
	}{
		{"hardened v1", fstest.MapFS{
			"proc/self/status":                           {Data: []byte(hardenedStatus)},
			"proc/self/mountinfo":                        {Data: []byte(roMounts)},
			"sys/fs/cgroup/pids/pids.max":                {Data: []byte("256\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("1073741824\n")},
			"sys/fs/cgroup/cpu/cpu.cfs_quota_us":         {Data: []byte("100000\n")},
			"sys/fs/cgroup/cpu/cpu.cfs_period_us":        {Data: []byte("100000\n")},
		}, func(t *testing.T, p wire.Posture) {
			if p.CapEff != "0000000000000000" || !p.NoNewPrivs || p.Seccomp != 2 || !p.ReadOnlyRoot ||
				p.PidsMax != 256 || p.MemoryMaxBytes != 1<<30 || p.CPUQuota != 1 || len(p.Errors) != 0 || p.UID != 1000 {
				t.Fatalf("%+v", p)
			}
		}},
		{"unconfined v2", fstest.MapFS{
			"proc/self/status":         {Data: []byte("CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\nNoNewPrivs:\t0\nSeccomp:\t0\n")},
			"proc/self/mountinfo":      {Data: []byte("1 0 0:1 / / rw,relatime - ext4 /dev/sda rw\n")},
			"sys/fs/cgroup/pids.max":   {Data: []byte("max\n")},
			"sys/fs/cgroup/memory.max": {Data: []byte("max\n")},
			"sys/fs/cgroup/cpu.max":    {Data: []byte("max 100000\n")},
		}, func(t *testing.T, p wire.Posture) {
			if p.NoNewPrivs || p.Seccomp != 0 || p.ReadOnlyRoot || p.PidsMax != 0 || p.MemoryMaxBytes != 0 || p.CPUQuota != 0 || len(p.Errors) != 0 {
				t.Fatalf("%+v", p)
			}
		}},
		{"v1 unlimited memory", fstest.MapFS{
			"proc/self/status":                           {Data: []byte(hardenedStatus)},
			"proc/self/mountinfo":                        {Data: []byte(roMounts)},
			"sys/fs/cgroup/pids/pids.max":                {Data: []byte("max")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("9223372036854771712")},
		}, func(t *testing.T, p wire.Posture) {
			if p.MemoryMaxBytes != 0 || p.PidsMax != 0 {
				t.Fatalf("%+v", p)
			}
		}},
		{"nothing readable", fstest.MapFS{}, func(t *testing.T, p wire.Posture) {
			if len(p.Errors) != 4 || p.NoNewPrivs || p.ReadOnlyRoot {
				t.Fatalf("%+v", p)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, posture.FromFS(tc.files, 1000, 1000)) })
	}
}

func TestReadRuns(t *testing.T) {
	t.Parallel()
	p := posture.Read()
	if p.CapEff == "" {
		t.Fatalf("no capabilities read on this host: %+v", p)
	}
}
