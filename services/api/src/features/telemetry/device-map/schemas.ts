import { z } from 'zod';
import { uuid } from '../../../http/common-schemas.ts';
import { onlineStatuses } from '../schemas.ts';

const int = () => z.number().int();

const bboxSchema = z
  .array(z.number())
  .length(4)
  .meta({ description: '`[minLon, minLat, maxLon, maxLat]` (GeoJSON order)', example: [4.03, 51.94, 4.07, 51.97] });

export const TelemetryOnlineStatusCounts = z
  .object({ online: int(), silent: int(), offline: int(), unknown: int(), disabled: int() })
  .meta({ id: 'TelemetryOnlineStatusCounts', description: 'Devices per online status' });

export const TelemetryDeviceClusterDevice = z
  .object({
    id: uuid,
    deviceId: z.string(),
    assetId: uuid,
    assetName: z.string(),
    assetDisplayCode: z.string(),
    onlineStatus: z.enum(onlineStatuses),
  })
  .meta({
    id: 'TelemetryDeviceClusterDevice',
    description: 'The device of a cell that holds one (null in a cell of several)',
  });

export const TelemetryDeviceCluster = z
  .object({
    count: int().meta({ description: 'Devices whose last position lies in the cell' }),
    latitude: z.number().meta({ description: 'Mean latitude of those devices' }),
    longitude: z.number().meta({ description: 'Mean longitude of those devices' }),
    bbox: bboxSchema.meta({ description: 'The box around those devices: `[minLon, minLat, maxLon, maxLat]`' }),
    onlineStatusCounts: TelemetryOnlineStatusCounts,
    device: TelemetryDeviceClusterDevice.nullable(),
  })
  .meta({ id: 'TelemetryDeviceCluster' });

export const TelemetryDeviceClusterResponse = z
  .object({
    bbox: bboxSchema.meta({ description: 'The box asked for (the whole world when none was given)' }),
    zoom: int(),
    cellPixels: int().meta({
      description: 'Width and height of a grid cell in pixels at `zoom` (web mercator, 256-pixel tiles)',
    }),
    total: int().meta({ description: 'Devices with a position in the box: the sum of the cells’ counts' }),
    extent: bboxSchema.nullable().meta({
      description: 'The box around every device counted (`[minLon, minLat, maxLon, maxLat]`); null when none',
    }),
    cells: z
      .array(TelemetryDeviceCluster)
      .meta({ description: 'Cells holding at least one device, north to south, west to east' }),
  })
  .meta({ id: 'TelemetryDeviceClusterResponse' });

export type TelemetryDeviceClusterBody = z.infer<typeof TelemetryDeviceCluster>;
