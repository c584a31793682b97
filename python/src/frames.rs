//! Tables as Arrow record batches, handed to pyarrow through the Arrow PyCapsule interface
//! (`__arrow_c_array__`, the C data interface in capsules): pyarrow takes the columns' buffers
//! as they are, so a table of a million jobs costs no Python object per row.

use std::ffi::CString;
use std::sync::Arc;

use arrow_array::ffi::to_ffi;
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, StructArray,
    UInt32Array, UInt64Array,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// One table. `pyarrow.record_batch(batch)` imports it without copying.
#[pyclass(frozen, module = "rtbox._rtbox")]
pub struct ArrowBatch {
    batch: RecordBatch,
}

#[pymethods]
impl ArrowBatch {
    /// The Arrow PyCapsule interface: (schema capsule, array capsule) of a struct array whose
    /// children are the columns. The consumer moves the structures out; a capsule that was not
    /// consumed releases its structure when it is collected.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<PyObject>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        // The schema is ours to choose; a consumer asking for another one casts afterwards.
        let _ = requested_schema;
        let data = StructArray::from(self.batch.clone()).to_data();
        let (array, schema) = to_ffi(&data).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let schema_name = CString::new("arrow_schema").expect("no NUL in the name");
        let array_name = CString::new("arrow_array").expect("no NUL in the name");
        Ok((
            PyCapsule::new(py, schema, Some(schema_name))?,
            PyCapsule::new(py, array, Some(array_name))?,
        ))
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }
}

/// Builds a table column by column.
#[derive(Default)]
pub struct Columns {
    fields: Vec<(&'static str, ArrayRef)>,
}

impl Columns {
    pub fn u64(mut self, name: &'static str, v: impl IntoIterator<Item = u64>) -> Self {
        let a: UInt64Array = v.into_iter().collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn opt_u64(mut self, name: &'static str, v: impl IntoIterator<Item = Option<u64>>) -> Self {
        let a: UInt64Array = v.into_iter().collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn opt_u32(mut self, name: &'static str, v: impl IntoIterator<Item = Option<u32>>) -> Self {
        let a: UInt32Array = v.into_iter().collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn u32(mut self, name: &'static str, v: impl IntoIterator<Item = u32>) -> Self {
        let a: UInt32Array = v.into_iter().collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn f64(mut self, name: &'static str, v: impl IntoIterator<Item = f64>) -> Self {
        let a: Float64Array = v.into_iter().map(Some).collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn bool(mut self, name: &'static str, v: impl IntoIterator<Item = bool>) -> Self {
        let a: BooleanArray = v.into_iter().map(Some).collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn str<'a>(mut self, name: &'static str, v: impl IntoIterator<Item = &'a str>) -> Self {
        let a: StringArray = v.into_iter().map(Some).collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn opt_str<'a>(
        mut self,
        name: &'static str,
        v: impl IntoIterator<Item = Option<&'a str>>,
    ) -> Self {
        let a: StringArray = v.into_iter().collect();
        self.fields.push((name, Arc::new(a)));
        self
    }

    pub fn finish(self) -> PyResult<ArrowBatch> {
        let batch = RecordBatch::try_from_iter(self.fields)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(ArrowBatch { batch })
    }
}
