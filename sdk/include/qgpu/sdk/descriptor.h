/* The plugin descriptor: the one symbol every plugin exports.
 *
 * Plain C so the host can read it before it trusts anything else about the
 * library. The ABI version comes first and is checked first; only when it
 * matches are the other fields read. A plugin defines its descriptor with
 * QGPU_DEFINE_PLUGIN (qgpu/sdk/plugin.h), never by hand.
 */
#ifndef QGPU_SDK_DESCRIPTOR_H_
#define QGPU_SDK_DESCRIPTOR_H_

#include <stddef.h>
#include <stdint.h>

#include "qgpu/sdk/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Name of the exported entry function: const QgpuPluginDescriptor* qgpu_plugin_descriptor(void). */
#define QGPU_PLUGIN_ENTRY_SYMBOL "qgpu_plugin_descriptor"

typedef enum QgpuPluginKind {
  QGPU_PLUGIN_FRONTEND = 1,
  QGPU_PLUGIN_MACHINE = 2,
  QGPU_PLUGIN_BASE_MODEL = 3,
  QGPU_PLUGIN_TENSOR_BACKEND = 4
} QgpuPluginKind;

typedef enum QgpuOptionType {
  QGPU_OPTION_STRING = 1,
  QGPU_OPTION_INT = 2,
  QGPU_OPTION_FLOAT = 3,
  QGPU_OPTION_BOOL = 4,
  QGPU_OPTION_ENUM = 5, /* one of `choices` */
  QGPU_OPTION_PATH = 6  /* a file or directory that must exist, relative to the config file;
                           or one of the keywords in `choices` taken verbatim */
} QgpuOptionType;

/* One key a plugin accepts in its config section. Strings are static. */
typedef struct QgpuOptionSpec {
  const char* name;
  QgpuOptionType type;
  const char* default_value; /* NULL: the key is required */
  const char* choices;       /* '|'-separated, for ENUM and PATH keywords; else NULL */
  const char* help;
  int64_t min_value; /* INT only; min > max means unbounded */
  int64_t max_value;
} QgpuOptionSpec;

/* What the host hands to create(): the validated options and a log sink. */
typedef struct QgpuHostContext QgpuHostContext;

typedef struct QgpuPluginDescriptor {
  uint32_t abi_version; /* must equal QGPU_ABI_VERSION; always the first field */
  uint32_t struct_size; /* sizeof(QgpuPluginDescriptor) as the plugin saw it */
  const char* sdk_version;
  const char* build_fingerprint;
  QgpuPluginKind kind;
  const char* name;
  const char* version;
  const char* summary;
  const QgpuOptionSpec* options;
  uint32_t option_count;
  /* Creates the plugin object (a qgpu::sdk::Plugin subclass matching `kind`).
   * Returns 0 and sets *out, or non-zero with a message in error (NUL-terminated). */
  int (*create)(const QgpuHostContext* context, void** out, char* error, size_t error_size);
  void (*destroy)(void* plugin);
} QgpuPluginDescriptor;

typedef const QgpuPluginDescriptor* (*QgpuPluginEntryFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* QGPU_SDK_DESCRIPTOR_H_ */
