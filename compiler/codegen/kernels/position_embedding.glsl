// result[t, :] = table[start_position + t, :]. Grid (T, 1, 1).
void main() {
  uint t = gl_WorkGroupID.x;
  uint position = min(state_.position + t, POSITIONS - 1);
  for (uint i = gl_LocalInvocationID.x; i < HIDDEN; i += WORKGROUP)
    store_result(t * HIDDEN + i, load_table(position * HIDDEN + i));
}
