// Everything a plugin needs: include this one header.
#pragma once

#include "qgpu/sdk/base_model.h"
#include "qgpu/sdk/descriptor.h"
#include "qgpu/sdk/frontend.h"
#include "qgpu/sdk/machine.h"
#include "qgpu/sdk/plugin.h"
#include "qgpu/sdk/status.h"
#include "qgpu/sdk/tensor_backend.h"
#include "qgpu/sdk/tensor_view.h"
#include "qgpu/sdk/version.h"
