package soak_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// violatedPod finds the pod that an oracle violation names.
var violatedPod = regexp.MustCompile(`pod (\S+/\S+) \(uid `)

// podLogLines returns what the replicas logged about each pod that a
// violation names (their log files in dir, as the soak writes them), at
// most podLogMax lines a pod, the last ones: what a failed CI run needs to
// tell the controller's account of the pod from the oracle's.
func podLogLines(dir string, violations []string) string {
	var pods []string
	for _, v := range violations {
		if m := violatedPod.FindStringSubmatch(v); m != nil && !slices.Contains(pods, m[1]) {
			pods = append(pods, m[1])
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, pod := range pods {
		fmt.Fprintf(&b, "\nthe replicas' log lines about %s:\n", pod)
		var lines []string
		needle := fmt.Sprintf("pod=%q", pod)
		for _, name := range logs {
			if filepath.Base(name) == "audit.log" {
				continue
			}
			f, err := os.Open(name)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				if line := sc.Text(); strings.Contains(line, needle) {
					lines = append(lines, filepath.Base(name)+": "+line)
				}
			}
			f.Close()
		}
		// In time order: klog's header (I1202 16:51:06.001290) after the
		// file's name.
		slices.SortStableFunc(lines, func(a, b string) int { return strings.Compare(klogTime(a), klogTime(b)) })
		if len(lines) > podLogMax {
			fmt.Fprintf(&b, "(%d lines before these)\n", len(lines)-podLogMax)
			lines = lines[len(lines)-podLogMax:]
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// podLogMax is how many log lines a violated pod gets in a failed soak's
// output.
const podLogMax = 60

// klogTime returns the time in a log line's klog header, after the file's
// name, or "".
func klogTime(line string) string {
	_, rest, _ := strings.Cut(line, ": ")
	if len(rest) < 21 {
		return ""
	}
	return rest[1:21]
}
