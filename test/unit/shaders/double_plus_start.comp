// The test kernel of test-vulkan: y[i] = 2 * x[i] + start for the first `tokens` elements.
#version 450

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Params {
  uint tokens; // elements to process; the grid is rounded up to whole workgroups
  uint start;
} params;

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= params.tokens) return;
  y[i] = 2.0 * x[i] + float(params.start);
}
