#!/usr/bin/env bash
# The Vulkan tests once more under Khronos' validation layer (Debian's vulkan-validationlayers):
# every use of the API they make must be valid, not only give the right numbers on lavapipe,
# since a real GPU's driver forgives less. Any validation message fails the run.
#
# usage: scripts/test-vulkan-validation.sh BUILD_DIR
set -euo pipefail
build=${1:?build directory}
if [ ! -d "$build/vulkan_shaders" ]; then
  echo "test-vulkan-validation: skipped, $build has no Vulkan backend (libvulkan-dev and glslc)"
  exit 0
fi
manifest=VkLayer_khronos_validation.json
found=
for dir in /usr/share/vulkan/explicit_layer.d /usr/local/share/vulkan/explicit_layer.d \
  /etc/vulkan/explicit_layer.d; do
  [ -f "$dir/$manifest" ] && found=1
done
if [ -z "$found" ]; then
  echo "test-vulkan-validation: the validation layer is missing (scripts/install-deps.sh installs" \
    "vulkan-validationlayers)" >&2
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The layer writes its messages to stdout when no debug messenger is installed, as tern installs
# none. Every test with Vulkan in its name; those that run the tern binary (DeviceCli) capture
# their child's output themselves, so only this process's own Vulkan use is checked.
if ! VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation OMP_WAIT_POLICY=passive \
  "$build/tern_tests" --gtest_filter='*Vulkan*' >"$log" 2>&1; then
  tail -40 "$log" >&2
  echo "test-vulkan-validation: the Vulkan tests failed under the validation layer" >&2
  exit 1
fi
if grep -q "Validation Error\|Validation Warning\|VUID-" "$log"; then
  grep -m 20 "Validation Error\|Validation Warning\|VUID-" "$log" >&2
  echo "test-vulkan-validation: the validation layer reported the messages above" >&2
  exit 1
fi
grep -m 1 "test suites ran" "$log" | sed 's/^/test-vulkan-validation: clean, /'
