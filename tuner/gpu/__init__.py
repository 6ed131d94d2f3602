"""Everything that touches the device. These modules import cupy; nothing outside this
package does, and `tuner.gpu.runner` imports it only inside the worker process."""
