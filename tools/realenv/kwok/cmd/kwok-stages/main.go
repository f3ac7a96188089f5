// Command kwok-stages prints the Stage configuration kwokctl gives kwok by
// default (nodes initialised at once and kept alive through their Leases;
// pods Ready at once, Job pods completed, pods deleted), as one
// multi-document YAML for `kwok --config FILE`: kwok alone runs no stage
// unless told. One stage is added: a Pod of no controller that must not
// restart (restartPolicy Never or OnFailure, what Helm hook Pods are)
// completes like a Job's, so helm's wait for a hook Pod ends as on a cluster.
package main

import (
	"fmt"
	"os"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kwok-stages > stages.yaml")
		os.Exit(2)
	}
	docs := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
		podCompleteRunOnce,
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Println(strings.TrimRight(d, "\n"))
	}
}

// podCompleteRunOnce is pod-complete of kustomize/stage/pod/fast for Pods
// without owner whose restartPolicy lets them finish.
const podCompleteRunOnce = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete-run-once
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.ownerReferences'
      operator: 'DoesNotExist'
    - key: '.spec.restartPolicy'
      operator: 'In'
      values:
      - 'Never'
      - 'OnFailure'
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
`
