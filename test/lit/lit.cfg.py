# lit configuration of gerbil: FileCheck tests of the dialect, the passes, codegen and the tools.
import os
import sys
import lit.formats

config.name = "gerbil"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.gerbil_binary_dir, "test", "lit")
config.environment["PATH"] = os.pathsep.join(
    [config.gerbil_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
for name in ["VK_DRIVER_FILES", "VK_ICD_FILENAMES", "HOME"]:
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%tools_src", os.path.join(config.gerbil_source_dir, "tools")))
config.substitutions.append(("%tools", config.gerbil_tools_dir))
config.substitutions.append(("%bench", os.path.join(config.gerbil_source_dir, "bench")))
config.substitutions.append(("%fixtures", os.path.join(config.gerbil_source_dir, "test", "fixtures")))

# Tests that run kernels need a Vulkan device (lavapipe in CI): REQUIRES: vulkan.
import subprocess
try:
    devices = subprocess.run([os.path.join(config.gerbil_tools_dir, "gerbil-exec"), "--list-devices"],
                             capture_output=True, text=True, timeout=60, env=config.environment)
    if devices.returncode == 0 and devices.stdout.strip():
        config.available_features.add("vulkan")
        # REQUIRES: small-bindings: the default device binds at most 128 MiB a descriptor (lavapipe).
        import json
        info = subprocess.run([os.path.join(config.gerbil_tools_dir, "gerbil-exec"), "--device-info", "--json"],
                              capture_output=True, text=True, timeout=60, env=config.environment)
        listed = json.loads(info.stdout) if info.returncode == 0 else []
        chosen = next((d for d in listed if d["type"] == "discrete"), listed[0] if listed else None)
        if chosen and chosen["max_storage_buffer_range"] <= 128 << 20:
            config.available_features.add("small-bindings")
except (OSError, subprocess.TimeoutExpired, ValueError, LookupError):
    pass
