// Package devicetaints tracks the taints of a cluster's DRA devices for
// the controller: those of the devices in ResourceSlices and those
// DeviceTaintRules put on the devices they select, with a hold that keeps
// a rule's taint from evicting while the controller's guard holds it.
package devicetaints
