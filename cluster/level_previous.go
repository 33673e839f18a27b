//go:build linkraft_level6

package cluster

// FeatureLevel is 6 in a build with the tag linkraft_level6: the
// mixed-version tests run such a binary as the release before this one
// (cmd/linknode.TestRollingUpgradeFromThePreviousLevel). Everything gated
// on level 7 (replica moves and drains) is then held back by the cluster,
// as an older release's node would hold it back.
const FeatureLevel = 6
